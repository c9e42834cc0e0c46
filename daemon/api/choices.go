package api

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"tfd/scheduler"
)

// maxChoices bounds n: each choice is a stream of its own, holding a session.
const maxChoices = 8

// choiceCount reads the n field: 1 when unset, else 1 to maxChoices.
func choiceCount(n *int) (int, *apiError) {
	switch {
	case n == nil:
		return 1, nil
	case *n < 1 || *n > maxChoices:
		return 0, badRequest("n", "n must be from 1 to %d (each choice holds a session of its own), got %d", maxChoices, *n)
	}
	return *n, nil
}

// choiceSeeds returns the seed of each of n choices. Choice 0 takes the request's seed, so n = 1
// is the request it always was. When the request set a seed s, choice i takes s+i (mod 2^64):
// any choice can be replayed alone as a single-choice request with that seed, and a client can
// tell the seeds before it asks. Without one, every choice gets a fresh seed of its own, reported
// in its tfd object.
func (h *Handler) choiceSeeds(first uint64, raw json.RawMessage, n int) []uint64 {
	seeds := make([]uint64, n)
	seeds[0] = first
	s := strings.TrimSpace(string(raw))
	fresh := s == "" || s == "null" || s == "-1"
	for i := 1; i < n; i++ {
		if fresh {
			seeds[i] = h.newSeed()
		} else {
			seeds[i] = first + uint64(i)
		}
	}
	return seeds
}

// choiceRequest returns the request of choice i: j's, with the choice's seed.
func (j *job) choiceRequest(i int) scheduler.Request {
	req := j.req
	req.Sampling.Seed = j.seeds[i]
	return req
}

// choiceRun is one choice being made: its stream, and what its reply has come to.
type choiceRun struct {
	events   <-chan scheduler.Event
	cancel   context.CancelFunc
	res      result
	text     strings.Builder
	logprobs []tokenLogprob
}

// submitChoices submits every choice of j. If one is refused, those already submitted are
// cancelled and drained, and the refusal is the answer.
func (h *Handler) submitChoices(ctx context.Context, j *job) ([]*choiceRun, *apiError) {
	runs := make([]*choiceRun, 0, len(j.seeds))
	for i := range j.seeds {
		events, cancel, e := h.submit(ctx, j.choiceRequest(i), j.promptParam)
		if e != nil {
			for _, c := range runs {
				c.cancel()
				for range c.events { // the host closes it after the terminal event
				}
			}
			return nil, e
		}
		runs = append(runs, &choiceRun{events: events, cancel: cancel})
	}
	return runs, nil
}

// consumeChoices consumes every choice at once, each on its own goroutine, passing its text to
// emit(i, …), and returns when all have ended. A choice that fails cancels the others: the
// request is answered with its error. emit must be safe for concurrent use.
func (h *Handler) consumeChoices(ctx context.Context, j *job, runs []*choiceRun, emit func(i int, text string, lps []tokenLogprob) error) []error {
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, c := range runs {
		wg.Go(func() {
			c.res, errs[i] = h.consume(ctx, c.events, c.cancel, j, func(t string, lp []tokenLogprob) error { return emit(i, t, lp) })
			if c.res.err != nil || errs[i] != nil {
				for _, other := range runs {
					other.cancel()
				}
			}
		})
	}
	wg.Wait()
	return errs
}

// total is the request's result as a whole, for its log line, its metrics and its usage: the
// choices' generated tokens summed, the first failure, and the prompt tokens that no choice
// computed.
func total(runs []*choiceRun) result {
	var t result
	for i, c := range runs {
		t.tokens = append(t.tokens, c.res.tokens...)
		t.drafted += c.res.drafted
		t.accepted += c.res.accepted
		if i == 0 || c.res.cached < t.cached {
			t.cached = c.res.cached
		}
		if t.err == nil {
			t.err = c.res.err
		}
	}
	return t
}
