package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// replyFormat shapes one endpoint's responses: chat completions and completions send the same
// reply in different JSON. A format is made for choice 0; choice returns the others'.
type replyFormat interface {
	// responseID returns the response's id ("chatcmpl-…", "cmpl-…"), for the log.
	responseID() string
	// choice returns the format of choice i of a response of n choices: its chunks carry index
	// i, and what it keeps from chunk to chunk (calls held back, text offsets) is its own.
	choice(i, n int) replyFormat
	// first returns the chunk that opens the choice's stream, or nil.
	first() any
	// chunk returns the stream chunks carrying text and the logprobs of its tokens (and tool
	// calls that have come whole), none when there is nothing to send yet.
	chunk(text string, logprobs []tokenLogprob) []any
	// final returns the choice's last stream chunks: any it held back (tool calls), then the one
	// that carries its finish reason and its tfd object (the response's when n is 1, the
	// choice's beside its finish reason when more).
	final(finish string, info tfdInfo) []any
	// usage returns the stream's last chunk for stream_options.include_usage: usage, no choices.
	usage(u usage, info tfdInfo) any
	// whole returns the response of a request that did not stream, from its choices' formats
	// and replies, in order; info is choice 0's.
	whole(choices []wholeChoice, u usage, info tfdInfo) any
}

// wholeChoice is one choice of a response that did not stream.
type wholeChoice struct {
	f        replyFormat // the choice's format
	text     string
	logprobs []tokenLogprob
	finish   string
	info     tfdInfo
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

// usage counts the prompt once and the tokens of res, which are every choice's together.
func (j *job) usage(res result) usage {
	u := usage{PromptTokens: len(j.req.Prompt), CompletionTokens: len(res.tokens), TotalTokens: len(j.req.Prompt) + len(res.tokens)}
	if res.cached > 0 {
		u.PromptTokensDetails = &promptDetail{CachedTokens: res.cached}
	}
	return u
}

// info is the tfd object of choice i, whose reply is res.
func (j *job) info(i int, res result) tfdInfo {
	return tfdInfo{Seed: j.seeds[i], TokensHash: tokensHash(res.tokens), Drafted: res.drafted, Accepted: res.accepted}
}

// serveReply runs j's choices and answers with their replies in format f, streamed or whole.
func (h *Handler) serveReply(w http.ResponseWriter, r *http.Request, j *job, f replyFormat) {
	runs, e := h.submitChoices(r.Context(), j)
	if e != nil {
		writeError(w, e)
		return
	}
	if j.stream {
		h.streamReply(w, r, runs, j, f)
		return
	}
	h.consumeChoices(r.Context(), j, runs, func(i int, t string, lp []tokenLogprob) error {
		runs[i].text.WriteString(t) // each choice's goroutine writes only its own run
		runs[i].logprobs = append(runs[i].logprobs, lp...)
		return nil
	})
	all := total(runs)
	noteTokens(r.Context(), len(j.req.Prompt), all)
	if all.err != nil {
		if r.Context().Err() != nil {
			statsOf(r.Context()).clientGone.Store(true)
			return
		}
		writeError(w, all.err)
		return
	}
	choices := make([]wholeChoice, len(runs))
	for i, c := range runs {
		choices[i] = wholeChoice{f: f.choice(i, len(runs)), text: c.text.String(), logprobs: c.logprobs, finish: c.res.finish, info: j.info(i, c.res)}
	}
	WriteJSON(w, http.StatusOK, f.whole(choices, j.usage(all), choices[0].info))
}

// streamReply sends the reply as server-sent events: a data line per chunk, then data: [DONE].
// An error after the stream began is sent as an OpenAI-shaped error event before [DONE].
//
// A client that has not taken an event within j.stall (server.stall_timeout) has stalled: the
// write fails at its deadline, and the stream is cancelled so that its session serves others.
// The kernel's socket buffers take some events before a write blocks, so a stalled client is
// noticed once they are full.
//
// Several choices stream at once, their chunks interleaved as their tokens come, each chunk
// naming its choice's index, as OpenAI streams them; once all have ended, each choice's finish
// chunk, in order (so an error in one is never sent after another's finish), then the usage
// chunk and [DONE].
func (h *Handler) streamReply(w http.ResponseWriter, r *http.Request, runs []*choiceRun, j *job, f replyFormat) {
	s := startSSE(w, j.stall)
	formats := make([]replyFormat, len(runs))
	for i := range runs {
		if formats[i] = f.choice(i, len(runs)); formats[i].first() != nil {
			s.send(formats[i].first()) // a failed write shows again at the next one, and the client's context ends
		}
	}
	var mu sync.Mutex // guards s: the choices' goroutines take turns
	send := func(v any) error {
		mu.Lock()
		defer mu.Unlock()
		return s.send(v)
	}
	errs := h.consumeChoices(r.Context(), j, runs, func(i int, t string, lp []tokenLogprob) error {
		for _, c := range formats[i].chunk(t, lp) {
			if err := send(c); err != nil {
				return err
			}
		}
		return nil
	})
	all := total(runs)
	noteTokens(r.Context(), len(j.req.Prompt), all)
	if err := errors.Join(errs...); err != nil || r.Context().Err() != nil {
		statsOf(r.Context()).clientGone.Store(true)
		if errors.Is(err, os.ErrDeadlineExceeded) { // consume has cancelled the streams: their sessions are free
			h.opts.Logger.Warn("client stalled: reply cancelled", "id", f.responseID(), "stalled_for", seconds(j.stall))
		}
		return
	}
	if all.err != nil {
		statsOf(r.Context()).lateStatus.Store(int32(all.err.status))
		s.send(all.err.body())
		s.done()
		return
	}
	for i, c := range runs {
		for _, chunk := range formats[i].final(c.res.finish, j.info(i, c.res)) {
			s.send(chunk)
		}
	}
	if j.includeUsage {
		s.send(f.usage(j.usage(all), j.info(0, runs[0].res)))
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
