package scheduler

import (
	"errors"
	"fmt"
	"time"
)

// Sampling holds one stream's sampling settings. The zero value is greedy decoding.
type Sampling struct {
	// Temperature scales logits; 0 means greedy (argmax, ties to the lowest token id).
	Temperature float32
	// TopK keeps the K most likely tokens; 0 keeps all.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability reaches TopP; 0 or 1
	// keeps all.
	TopP float32
	// MinP drops tokens less likely than MinP times the most likely one; 0 keeps all.
	MinP float32
	// Seed keys the noise of the sampled draws: the token drawn at absolute position p depends only
	// on (Seed, p) and the row's logits.
	Seed uint64
	// Penalties change the logits before the draw (penalty.go); the zero value changes nothing.
	Penalties Penalties
}

// Drafts says where a stream's draft tokens may come from. Drafts are fed after the newest token
// in the same forward and kept while they equal the tokens the model picks.
type Drafts struct {
	// MTP is the deepest chain the model's MTP head drafts a round, when the model has one: the
	// head's guess for the token after the newest, fed back to guess the one after that, and so on;
	// 0 drafts nothing from the head.
	MTP int
	// NGram is the most tokens a round copied from the stream's own context: what followed the
	// latest earlier occurrence of its last few tokens.
	NGram int
}

// max returns the most draft tokens a round.
func (d Drafts) max() int { return max(d.MTP, 0) + max(d.NGram, 0) }

// Greedy reports whether s picks the argmax.
func (s Sampling) Greedy() bool { return s.Temperature == 0 }

// Request is one reply to be made.
type Request struct {
	// Prompt holds the prompt's token ids; it must not be empty.
	Prompt []int32
	// MaxTokens bounds the tokens generated; it must be positive.
	MaxTokens int
	Sampling  Sampling
	// StopTokens end the reply when generated (the model's EOS ids); the stop token itself is
	// reported in the final event and is not part of the text.
	StopTokens []int32
	// Logprobs asks for the log-probability of each generated token; TopLogprobs, for that many of
	// the likeliest tokens at each position besides (at most MaxTopLogprobs).
	Logprobs    bool
	TopLogprobs int
	// Drafts says how the host may speculate for the stream; the zero value drafts nothing. The
	// reply is the same bits either way; only its speed differs.
	Drafts Drafts
	// Constraint, when set, limits the generated tokens (a grammar); nil constrains nothing.
	Constraint Constraint
}

// TokenLogprob is a token and its natural-log probability.
type TokenLogprob struct {
	Token   int32
	Logprob float32
}

// MaxTopLogprobs bounds Request.TopLogprobs, as OpenAI's API does.
const MaxTopLogprobs = 20

// FinishReason says why a stream ended.
type FinishReason string

// The ways a stream ends. Every stream ends exactly once.
const (
	FinishStop      FinishReason = "stop"      // a stop token was generated
	FinishLength    FinishReason = "length"    // MaxTokens reached, or the context is full
	FinishCancelled FinishReason = "cancelled" // the request's context ended
	FinishError     FinishReason = "error"     // Event.Err says what went wrong
)

// Event is one step of a stream: a generated token, or the end.
type Event struct {
	// Token is the generated token id; valid when Done is false.
	Token int32
	// Logprob is the natural-log probability of Token under the model's (unfiltered, temperature 1)
	// distribution, when the request asked for it; Top holds the request's TopLogprobs likeliest
	// tokens there, likeliest first (ties to the lower id).
	Logprob float32
	Top     []TokenLogprob
	// Done marks the last event of the stream; Reason (and Err for FinishError) say why.
	Done   bool
	Reason FinishReason
	Err    error
	// StopToken is the stop token that ended the stream when Reason is FinishStop, or -1 when
	// the request's Constraint was complete and allowed nothing more, not even a stop token.
	StopToken int32
	// Drafted and Accepted count, on the terminal event, the draft tokens proposed for the stream
	// and those the model confirmed.
	Drafted, Accepted int
	// Cached counts, on the terminal event, the prompt tokens whose keys and values were not
	// computed: the stream's session still held them from an earlier stream with the same start,
	// or the prompt cache restored them.
	Cached int
}

// ErrQueueFull is what Host.Submit's error is (errors.Is) when the admission queue is at its
// bound; the caller should retry later (HTTP 503 with Retry-After).
var ErrQueueFull = errors.New("scheduler: queue full")

// QueueFullError is returned by Host.Submit when the admission queue is at its bound;
// errors.Is(err, ErrQueueFull) reports true for it. RetryAfter estimates how long the streams
// queued ahead take to get their sessions: a client that waits that long is likely to be admitted.
type QueueFullError struct{ RetryAfter time.Duration }

func (e *QueueFullError) Error() string { return ErrQueueFull.Error() }

// Is makes errors.Is(err, ErrQueueFull) true.
func (e *QueueFullError) Is(target error) bool { return target == ErrQueueFull }

// ErrClosed is returned by Host.Submit after the host has been closed.
var ErrClosed = errors.New("scheduler: host closed")

// PromptTooLongError is returned by Host.Submit when a prompt cannot fit any session.
type PromptTooLongError struct {
	Prompt  int // tokens in the prompt
	Context int // the most tokens a session holds
}

func (e *PromptTooLongError) Error() string {
	return fmt.Sprintf("scheduler: the prompt has %d tokens and the context holds %d: shorten the prompt", e.Prompt, e.Context)
}
