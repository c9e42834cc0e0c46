package scheduler

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Picks made ahead, side by side. After a round the host picks the token that follows each row
// whose logits it read back, and verify walks each stream's rows in order, accepting while its
// drafts hold. Where a stream is not constrained, row d's pick depends only on the row's logits,
// the settings, the position and the tokens the stream holds once its drafts before d are
// accepted, which is the only case in which the walk picks at row d; so every row's pick can be
// made before the walk, and those of all the round's streams side by side on every core: a sampled
// pick over a large vocabulary takes milliseconds of one core (top_p's softmax), and a round of 32
// sampled streams took 32 of them one after another. A pick is a pure function of its inputs, so
// a pick made ahead is the one verify would make; rows after a draft that misses are picked for
// nothing, at most the drafts of one round. Penalties read the stream's counts, brought up to its
// tokens before the jobs start and only read by them, plus the drafts before the row
// (penalisedAfter). Log-probabilities, a pass over the row's logits of their own, are taken ahead
// with the pick for the streams that ask.

// pickJob is one row to pick ahead: logits row row of the round, at position pos, for a, whose
// penalties count extra after its tokens.
type pickJob struct {
	a        *active
	row, pos int
	extra    []int32
}

// pickAhead reports whether a's picks can be made ahead of its walk: a constraint's state moves
// with each token the walk accepts.
func pickAhead(a *active) bool { return a.constrained == nil }

// prepick picks ahead, into l.ahead (by logits row), the rows of the round's streams that
// pickAhead allows, where there are at least two, and marks their shares; it returns what one
// row's pick cost on average, wall time over rows, which stands for each row in the host's costs.
func (l *laneState) prepick(logits []float32, vocab int) time.Duration {
	l.jobs = l.jobs[:0]
	for i := range l.shares {
		s := &l.shares[i]
		if s.ahead = s.logits >= 0 && !s.picked && pickAhead(s.a); !s.ahead {
			continue
		}
		if s.a.req.Sampling.Penalties.Active() {
			s.a.countPenalties()
		}
		for d := range 1 + len(s.a.drafts) {
			l.jobs = append(l.jobs, pickJob{a: s.a, row: s.logits + d, pos: len(s.a.tokens) + d, extra: s.a.drafts[:d]})
		}
	}
	if len(l.jobs) < 2 {
		for i := range l.shares {
			l.shares[i].ahead = false // one row: the walk picks it as quickly
		}
		return 0
	}
	if rows := len(logits) / vocab; len(l.ahead) < rows {
		l.ahead, l.aheadLP = make([]int32, rows), make([]Event, rows)
	}
	start := l.now()
	l.pickJobs(logits, vocab, l.ahead, l.aheadLP)
	return l.now().Sub(start) / time.Duration(len(l.jobs))
}

// pickJobs picks each of l.jobs' rows of logits into out[row], side by side on up to GOMAXPROCS
// goroutines, each with a sampler of its own, and where lps is not nil, the log-probabilities of
// the rows of streams that ask for them into lps[row].
func (l *laneState) pickJobs(logits []float32, vocab int, out []int32, lps []Event) {
	workers := min(runtime.GOMAXPROCS(0), len(l.jobs))
	for len(l.smps) < workers {
		l.smps = append(l.smps, new(sampler))
	}
	for _, smp := range l.smps[:workers] {
		// The rows run side by side already: a wide pick spreads over its share of the cores.
		smp.cores = max(1, runtime.GOMAXPROCS(0)/workers)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			smp := l.smps[w]
			for j := int(next.Add(1) - 1); j < len(l.jobs); j = int(next.Add(1) - 1) {
				job := l.jobs[j]
				row := logits[job.row*vocab : (job.row+1)*vocab]
				allowed := row
				if job.a.req.Sampling.Penalties.Active() {
					smp.penalised = job.a.penalisedAfter(row, job.extra, smp.penalised)
					allowed = smp.penalised
				}
				tok := smp.pick(allowed, job.a.req.Sampling, job.pos)
				out[job.row] = tok
				if lps != nil && job.a.req.Logprobs {
					lps[job.row].Logprob, lps[job.row].Top = smp.logprobs(row, tok, job.a.req.TopLogprobs)
				}
			}
		})
	}
	wg.Wait()
}

// predraft picks ahead, into l.ahead (by row of the head's logits), the drafts of the streams
// draftMTP chains, where there are at least two; it reports whether it did. A draft is the keyed
// pick at the position it would take, over the head's logits with the stream's penalties as its
// tokens leave them (draftMTP's penalised), as the round's picks are.
func (l *laneState) predraft(logits []float32, vocab int) bool {
	l.jobs = l.jobs[:0]
	for i, a := range l.drafting {
		if a.req.Sampling.Penalties.Active() {
			a.countPenalties()
		}
		l.jobs = append(l.jobs, pickJob{a: a, row: i, pos: len(a.tokens) + len(a.mtpDrafts)})
	}
	if len(l.jobs) < 2 {
		return false
	}
	if len(l.ahead) < len(l.drafting) {
		l.ahead, l.aheadLP = make([]int32, len(l.drafting)), make([]Event, len(l.drafting))
	}
	l.pickJobs(logits, vocab, l.ahead, nil)
	return true
}
