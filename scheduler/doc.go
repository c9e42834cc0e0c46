// Package scheduler is the lane core: it turns requests into streams of tokens. It owns streams,
// sessions (ranges of the model's KV slots), rounds (batched forwards), drafting, keyed sampling,
// admission and cancellation, and sees the engine only through the Model interface and the
// abilities it is given (batch.Drafter, batch.Chainer, batch.DraftChainer, batch.Warmer,
// batch.Stateful) or the Model has (batch.Picker: the rows of a greedy stream without logprobs,
// constraint or penalties ask for their picks, not their logits).
//
// One goroutine, the lane, owns all of that state; Submit, Close, Reconfigure and Stats reach it
// through a channel, a wake signal and a few atomics. Each turn of the lane ends cancelled
// streams, admits waiting ones into free sessions (preferring one that still holds the start of
// the prompt), and then either drives a stream that is alone (the lone driver, lone.go: a
// drafted forward at a time, or, where the model offers them, a greedy chain on the device, a
// forward a step, or a drafted chain on the device, a verified drafted forward a step,
// lonechain.go) or runs one shared round: a decoding row per stream, with the drafts priced rounds
// grant it, then prompt chunks with what is left. Drafts are the MTP head's chain (round.go's draftMTP)
// and n-gram copies after it (ngram.go).
//
// The lane never waits on a client. A stream's events go through a buffer and a relay goroutine
// to its reader; a stream whose reader is behind keeps its session and sits out rounds, and the
// relay wakes the lane when the reader catches up. When no stream can move, the lane blocks on
// arrivals, that wake signal (a reader caught up, a request ended, the routing changed) and the
// keep-warm timer; it never polls. A layout change applies at once to the part of the new layout
// that no running reply holds, and to the rest as those replies end.
//
// Every reply is exact: a forward's rows do not affect one another (the compute contract's batch
// invariance), and a token sampled at position p depends only on the logits, (seed, p) and the
// stream's own tokens before it, which its penalties read (penalty.go). So a
// reply is the same bits whether it ran alone or beside others, in one session or moved between
// two, with drafts or without, and from a reused prompt start or a fresh one; the tests hold the
// scheduler to each of these on the bundled model.
package scheduler
