package scheduler

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Picks made ahead, side by side. After a round the host picks the token that follows each row
// whose logits it read back, and verify walks each stream's rows in order, accepting while its
// drafts hold. Where a stream's pick depends only on its row's logits, its settings, the position
// and the tokens it holds before the round (no constraint), every row's pick can be made before
// the walk, and those of all such streams of a round side by side on every core: a sampled pick
// over a large vocabulary takes milliseconds of one core (top_p's softmax), and a round of 32
// sampled streams took 32 of them one after another. A pick is a pure function of its inputs,
// so a pick made ahead is the one verify would make; rows after a draft that misses are picked
// for nothing, at most the drafts of one round. Log-probabilities, a pass over the row's logits
// of their own, are taken ahead with the pick for the streams that ask. Penalties read the tokens
// the walk accepts, so a stream with penalties is picked ahead only in a round where it has no
// drafts (its one row follows the tokens it holds), and its penalties' state is touched by that
// one job alone.

// pickJob is one row to pick ahead: logits row row of the round, at position pos, for a.
type pickJob struct {
	a        *active
	row, pos int
}

// pickAhead reports whether a's picks can be made ahead of its walk.
func pickAhead(a *active) bool {
	return a.constrained == nil && (len(a.drafts) == 0 || !a.req.Sampling.Penalties.Active())
}

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
		for d := range 1 + len(s.a.drafts) {
			l.jobs = append(l.jobs, pickJob{a: s.a, row: s.logits + d, pos: len(s.a.tokens) + d})
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
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			smp := l.smps[w]
			for j := int(next.Add(1) - 1); j < len(l.jobs); j = int(next.Add(1) - 1) {
				job := l.jobs[j]
				row := logits[job.row*vocab : (job.row+1)*vocab]
				tok := smp.pick(job.a.penalised(row), job.a.req.Sampling, job.pos)
				out[job.row] = tok
				if lps != nil && job.a.req.Logprobs {
					lps[job.row].Logprob, lps[job.row].Top = logprobs(row, tok, job.a.req.TopLogprobs)
				}
			}
		})
	}
	wg.Wait()
}

// predraft picks ahead, into l.ahead (by row of the head's logits), the drafts of the streams
// draftMTP chains, where there are at least two; it reports whether it did. A draft is the keyed
// pick at the position it would take, over the head's logits with the stream's penalties as its
// tokens before the round leave them, as the round's picks are; a call of the head asks for one
// draft a stream, so each job touches its own stream's penalties alone.
func (l *laneState) predraft(logits []float32, vocab int) bool {
	l.jobs = l.jobs[:0]
	for i, a := range l.drafting {
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
