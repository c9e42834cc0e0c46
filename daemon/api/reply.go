package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"tfd/scheduler"
)

// replyFormat shapes one endpoint's responses: chat completions and completions send the same
// reply in different JSON.
type replyFormat interface {
	// responseID returns the response's id ("chatcmpl-…", "cmpl-…"), for the log.
	responseID() string
	// first returns the chunk that opens a stream, or nil.
	first() any
	// chunk returns the stream chunk carrying text and the logprobs of its tokens, or nil when
	// there is nothing to send yet.
	chunk(text string, logprobs []tokenLogprob) any
	// final returns the stream chunk that carries the finish reason and the tfd object.
	final(finish string, info tfdInfo) any
	// usage returns the stream's last chunk for stream_options.include_usage: usage, no choices.
	usage(u usage, info tfdInfo) any
	// whole returns the response of a request that did not stream.
	whole(text string, logprobs []tokenLogprob, finish string, u usage, info tfdInfo) any
}

// usage is OpenAI's token count of one request.
type usage struct {
	PromptTokens        int           `json:"prompt_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	TotalTokens         int           `json:"total_tokens"`
	PromptTokensDetails *promptDetail `json:"prompt_tokens_details,omitempty"`
}

// promptDetail is OpenAI's prompt_tokens_details: the prompt tokens whose keys and values an
// earlier request left in the session (a chat's earlier turns), so they were not computed again.
type promptDetail struct {
	CachedTokens int `json:"cached_tokens"`
}

// tfdInfo is the tfd object of every response: what is needed to replay and check the reply.
type tfdInfo struct {
	Seed       uint64 `json:"seed"`
	TokensHash string `json:"tokens_hash"`
	Drafted    int    `json:"drafted"`
	Accepted   int    `json:"accepted"`
}

func (j *job) usage(res result) usage {
	u := usage{PromptTokens: len(j.req.Prompt), CompletionTokens: len(res.tokens), TotalTokens: len(j.req.Prompt) + len(res.tokens)}
	if res.cached > 0 {
		u.PromptTokensDetails = &promptDetail{CachedTokens: res.cached}
	}
	return u
}

func (j *job) info(res result) tfdInfo {
	return tfdInfo{Seed: j.req.Sampling.Seed, TokensHash: tokensHash(res.tokens), Drafted: res.drafted, Accepted: res.accepted}
}

// serveReply runs j and answers with its reply in format f, streamed or whole.
func (h *Handler) serveReply(w http.ResponseWriter, r *http.Request, j *job, f replyFormat) {
	events, cancel, e := h.submit(r.Context(), j)
	if e != nil {
		writeError(w, e)
		return
	}
	if j.stream {
		h.streamReply(w, r, events, cancel, j, f)
		return
	}
	var text strings.Builder
	var logprobs []tokenLogprob
	res, _ := h.consume(r.Context(), events, cancel, j, func(t string, lp []tokenLogprob) error {
		text.WriteString(t)
		logprobs = append(logprobs, lp...)
		return nil
	})
	noteTokens(r.Context(), len(j.req.Prompt), res)
	if res.err != nil {
		if r.Context().Err() != nil {
			statsOf(r.Context()).clientGone.Store(true)
			return
		}
		writeError(w, res.err)
		return
	}
	WriteJSON(w, http.StatusOK, f.whole(text.String(), logprobs, res.finish, j.usage(res), j.info(res)))
}

// streamReply sends the reply as server-sent events: a data line per chunk, then data: [DONE].
// An error after the stream began is sent as an OpenAI-shaped error event before [DONE].
//
// A client that has not taken an event within j.stall (server.stall_timeout) has stalled: the
// write fails at its deadline, and the stream is cancelled so that its session serves others.
// The kernel's socket buffers take some events before a write blocks, so a stalled client is
// noticed once they are full.
func (h *Handler) streamReply(w http.ResponseWriter, r *http.Request, events <-chan scheduler.Event, cancel context.CancelFunc, j *job, f replyFormat) {
	s := startSSE(w, j.stall)
	if first := f.first(); first != nil {
		s.send(first) // a failed write shows again at the next one, and the client's context ends
	}
	res, err := h.consume(r.Context(), events, cancel, j, func(t string, lp []tokenLogprob) error {
		if c := f.chunk(t, lp); c != nil {
			return s.send(c)
		}
		return nil
	})
	noteTokens(r.Context(), len(j.req.Prompt), res)
	if err != nil || r.Context().Err() != nil {
		statsOf(r.Context()).clientGone.Store(true)
		if errors.Is(err, os.ErrDeadlineExceeded) { // consume has cancelled the stream: its session is free
			h.opts.Logger.Warn("client stalled: reply cancelled", "id", f.responseID(), "stalled_for", seconds(j.stall))
		}
		return
	}
	if res.err != nil {
		statsOf(r.Context()).lateStatus.Store(int32(res.err.status))
		s.send(res.err.body())
		s.done()
		return
	}
	info := j.info(res)
	s.send(f.final(res.finish, info))
	if j.includeUsage {
		s.send(f.usage(j.usage(res), info))
	}
	s.done()
}

// sse writes server-sent events, flushing each. Each write must be taken within stall.
type sse struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration // 0: no bound
}

func startSSE(w http.ResponseWriter, stall time.Duration) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w), stall: stall}
	s.bound()
	s.rc.Flush()
	return s
}

// bound gives the next write stall to be taken, counted from now: a deadline per write, not per
// stream, so a reply may stream for as long as it takes while its client reads.
func (s *sse) bound() {
	var deadline time.Time // zero: none
	if s.stall > 0 {
		deadline = time.Now().Add(s.stall)
	}
	s.rc.SetWriteDeadline(deadline) // ErrNotSupported from writers without a connection (tests'): no bound to keep
}

// send writes v as one event, "data: <json>\n\n", and flushes it to the client.
func (s *sse) send(v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.write("data: " + string(body) + "\n\n")
}

// done ends the stream as OpenAI does.
func (s *sse) done() error { return s.write("data: [DONE]\n\n") }

func (s *sse) write(line string) error {
	s.bound()
	if _, err := s.w.Write([]byte(line)); err != nil {
		return err
	}
	return s.rc.Flush()
}

// seconds formats d as a number of seconds, "60s" or "0.5s", for log lines.
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}
