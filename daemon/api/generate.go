package api

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"slices"
	"time"

	"tfd/scheduler"
)

// tokenLogprob is one generated token's text and natural-log probability.
type tokenLogprob struct {
	token   string
	logprob float32
	top     []tokenLogprob // the likeliest tokens at the position, when asked for
}

// result is how a reply ended.
type result struct {
	// tokens are the reply's generated ids, up to and including the one that completed a stop
	// string; a stop token (EOS) that ended the reply is not among them.
	tokens []int32
	// finish is "stop" or "length" when the reply ended normally.
	finish string
	// err is set when the reply failed; the handler answers with it (or sends it as a stream's
	// last event).
	err *apiError
	// drafted and accepted count the reply's draft tokens, and cached the prompt tokens its
	// session already held, from the host's terminal event.
	drafted, accepted, cached int
}

// emitFunc receives the reply's text as it becomes final, with the logprobs of the tokens it
// came from when they were asked for. An error (the client is gone) ends the reply.
type emitFunc func(text string, logprobs []tokenLogprob) error

// submit hands req to the host under a context of its own, so that the handler can end the stream
// early (a stop string matched, the client went away) by calling cancel.
func (h *Handler) submit(ctx context.Context, req scheduler.Request, promptParam string) (<-chan scheduler.Event, context.CancelFunc, *apiError) {
	ctx, cancel := context.WithCancel(ctx)
	events, err := h.served.Host.Submit(ctx, req)
	if err != nil {
		cancel()
		return nil, nil, submitError(err, promptParam)
	}
	return events, cancel, nil
}

// submitError maps Host.Submit's errors to HTTP answers.
func submitError(err error, promptParam string) *apiError {
	var tooLong *scheduler.PromptTooLongError
	switch {
	case errors.Is(err, scheduler.ErrQueueFull):
		after := queueRetryAfter(err)
		return &apiError{status: http.StatusServiceUnavailable, typ: errServer, code: "queue_full", retryAfter: after,
			message: fmt.Sprintf("tfd is busy: its request queue is full; retry in about %d s (Retry-After)", after)}
	case errors.Is(err, scheduler.ErrClosed):
		return shuttingDown()
	case errors.As(err, &tooLong):
		return &apiError{status: http.StatusBadRequest, typ: errInvalidRequest, param: promptParam, code: "context_length_exceeded",
			message: fmt.Sprintf("the prompt is %d tokens but the largest session holds %d: shorten the %s, or serve larger sessions (sessions.layout)", tooLong.Prompt, tooLong.Context, promptParam)}
	}
	return internalError("daemon: submit: %v", err)
}

// maxRetryAfter caps the Retry-After of a full queue: an estimate further out than this says
// little, and a client told to wait longer might give up instead of coming back.
const maxRetryAfter = 600

// queueRetryAfter is the Retry-After, in whole seconds, of a full queue: the host's estimate of
// when a place frees (a *scheduler.QueueFullError) rounded up, from 1 to maxRetryAfter; 1 when
// the host gave none.
func queueRetryAfter(err error) int {
	var full *scheduler.QueueFullError
	if !errors.As(err, &full) {
		return 1
	}
	return int(min(max(math.Ceil(full.RetryAfter.Seconds()), 1), maxRetryAfter))
}

func shuttingDown() *apiError {
	return &apiError{status: http.StatusServiceUnavailable, typ: errServer, code: "shutting_down", retryAfter: 5,
		message: "tfd is shutting down; retry when it is back"}
}

// consume reads a reply's events until it ends, turning tokens into text with a fresh decoder,
// cutting the text at the first of j's stop strings, and passing final text to emit. It always
// cancels the stream and waits for its channel to close before it returns, so no part of the
// reply outlives the request. ctx is the request's context; an error from emit is returned.
func (h *Handler) consume(ctx context.Context, events <-chan scheduler.Event, cancel context.CancelFunc, j *job, emit emitFunc) (res result, err error) {
	defer func() {
		cancel()
		for ev := range events { // the host closes the channel after its terminal event
			if ev.Done { // a stop string ended the reply before the host did
				res.drafted, res.accepted, res.cached = ev.Drafted, ev.Accepted, ev.Cached
			}
		}
	}()
	tok := h.served.Tokenizer
	dec := tok.NewDecoder()
	timing := statsOf(ctx)
	stops := stopMatcher{stops: j.stops}
	var pending []tokenLogprob // logprobs of tokens whose text has not been emitted yet
	for ev := range events {
		if ev.Done {
			res.finish, res.err = finishOf(ctx, ev)
			res.drafted, res.accepted, res.cached = ev.Drafted, ev.Accepted, ev.Cached
			break
		}
		res.tokens = append(res.tokens, ev.Token)
		timing.noteToken(time.Now())
		if j.req.Logprobs {
			lp := tokenLogprob{token: tok.Decode([]int32{ev.Token}), logprob: ev.Logprob}
			for _, alt := range ev.Top {
				lp.top = append(lp.top, tokenLogprob{token: tok.Decode([]int32{alt.Token}), logprob: alt.Logprob})
			}
			pending = append(pending, lp)
		}
		if tok.IsSpecial(ev.Token) && !slices.Contains(j.keepSpecial, ev.Token) {
			continue
		}
		text, stopped := stops.push(dec.Add(ev.Token))
		if stopped {
			res.finish = "stop"
			return res, emitSome(emit, text, pending)
		}
		if text != "" {
			if err := emit(text, pending); err != nil {
				return res, err
			}
			pending = nil
		}
	}
	if res.err != nil {
		return res, nil
	}
	if res.finish == "" {
		res.err = internalError("daemon: the reply's events ended without a final event")
		return res, nil
	}
	text, stopped := stops.push(dec.Flush())
	if stopped {
		res.finish = "stop"
	} else {
		text += stops.flush()
	}
	return res, emitSome(emit, text, pending)
}

// emitSome calls emit unless there is nothing to send.
func emitSome(emit emitFunc, text string, logprobs []tokenLogprob) error {
	if text == "" && len(logprobs) == 0 {
		return nil
	}
	return emit(text, logprobs)
}

// finishOf reads a terminal event: a finish reason, or the error to answer with.
func finishOf(ctx context.Context, ev scheduler.Event) (string, *apiError) {
	switch ev.Reason {
	case scheduler.FinishStop:
		return "stop", nil
	case scheduler.FinishLength:
		return "length", nil
	case scheduler.FinishCancelled:
		if ctx.Err() != nil {
			return "", &apiError{status: 499, typ: errInvalidRequest, message: "the client closed the request"}
		}
		return "", shuttingDown()
	}
	return "", internalError("daemon: the reply failed: %v", ev.Err)
}

// tokensHash is the tfd.tokens_hash of a reply: FNV-1a 64 over its token ids as little-endian
// int32, in 16 hex digits.
func tokensHash(ids []int32) string {
	h := fnv.New64a()
	var b [4]byte
	for _, id := range ids {
		binary.LittleEndian.PutUint32(b[:], uint32(id))
		h.Write(b[:])
	}
	return fmt.Sprintf("%016x", h.Sum64())
}
