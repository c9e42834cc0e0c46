package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"tfd/daemon/api/toolcall"
	"tfd/engine/chattemplate"
	"tfd/scheduler"
)

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	sampleParams
	Messages            []json.RawMessage `json:"messages"`
	MaxCompletionTokens *int              `json:"max_completion_tokens"`
	Logprobs            *bool             `json:"logprobs"`
	TopLogprobs         *int              `json:"top_logprobs"`
	Tools               []json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls   *bool             `json:"parallel_tool_calls"`
	ChatTemplateKwargs  map[string]any    `json:"chat_template_kwargs"`
	ResponseFormat      *responseFormat   `json:"response_format"`
}

// chatRoles are the message roles a request may use; developer is OpenAI's newer name for
// system, and templates see it as system.
var chatRoles = map[string]string{"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}

// chatCompletions answers POST /v1/chat/completions.
func (h *Handler) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if e := h.decodeBody(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	j, e := h.chatJob(&req)
	if e != nil {
		writeError(w, e)
		return
	}
	f := &chatFormat{id: newID("chatcmpl"), created: time.Now().Unix(), model: h.served.Name, logprobs: j.req.Logprobs}
	if offersTools(&req) {
		f.tools, f.oneCall = h.tools, req.ParallelToolCalls != nil && !*req.ParallelToolCalls
	}
	if h.harmonyMarkers != nil && !j.forcedCall {
		// GPT-OSS: its channels are read from the reply, and its calls with them.
		f.harmony, f.harmonyCalls, f.tools = true, f.tools != nil, nil
	}
	if j.forcedCall {
		f.tools = toolcall.Hermes // the grammar writes a forced call in the Hermes form, whatever the model's own
	}
	h.serveReply(w, r, j, f)
}

// chatJob validates req, renders its messages with the model's template and tokenizes them.
func (h *Handler) chatJob(req *chatRequest) (*job, *apiError) {
	if e := h.checkModel(req.Model); e != nil {
		return nil, e
	}
	if e := checkMaxTokens("max_completion_tokens", req.MaxCompletionTokens); e != nil {
		return nil, e
	}
	if req.MaxCompletionTokens != nil {
		req.MaxTokens = req.MaxCompletionTokens // the newer name wins
		req.maxTokensParam = "max_completion_tokens"
	}
	if n := req.TopLogprobs; n != nil && (*n < 0 || *n > scheduler.MaxTopLogprobs) {
		return nil, badRequest("top_logprobs", "top_logprobs must be from 0 to %d, got %d", scheduler.MaxTopLogprobs, *n)
	}
	if n := req.TopLogprobs; n != nil && *n > 0 && (req.Logprobs == nil || !*req.Logprobs) {
		return nil, badRequest("top_logprobs", "top_logprobs needs logprobs set to true")
	}
	constraint, e := h.constraint(req.ResponseFormat)
	if e != nil {
		return nil, e
	}
	call, e := h.forcedToolCall(req)
	if e != nil {
		return nil, e
	}
	if call != nil {
		constraint = call
	}
	msgs, e := parseMessages(req.Messages)
	if e != nil {
		return nil, e
	}
	if h.served.Template == nil {
		return nil, badRequest("messages", "the model %q has no chat template: use /v1/completions with a prompt", h.served.Name)
	}
	tools := req.Tools
	if !offersTools(req) {
		tools = nil // tool_choice "none": a model told of no tools writes no calls
	}
	prompt, err := h.served.Template.Render(msgs, chattemplate.Options{AddGenerationPrompt: true, Tools: tools, Kwargs: req.ChatTemplateKwargs})
	if err != nil {
		return nil, badRequest("messages", "the model's chat template rejected the messages: %v", err)
	}
	j, e := h.newJob(&req.sampleParams, h.served.Tokenizer.Encode(prompt), "messages")
	if e != nil {
		return nil, e
	}
	switch {
	case h.harmonyMarkers != nil && call == nil:
		j.keepSpecial = h.harmonyMarkers
	case tools != nil:
		j.keepSpecial = h.toolMarkers
	}
	j.forcedCall = call != nil
	j.req.Logprobs = req.Logprobs != nil && *req.Logprobs
	j.req.Constraint = constraint
	if req.TopLogprobs != nil {
		j.req.TopLogprobs = *req.TopLogprobs
	}
	return j, nil
}

// chatMessageIn is one message of a request.
type chatMessageIn struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent string          `json:"reasoning_content"`
	ToolCalls        json.RawMessage `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	Name             string          `json:"name"`
}

// parseMessages reads the messages field: at least one message, each with a known role and
// content that is a string or an array of text parts (joined with newlines); null only in an
// assistant message with tool calls. Tool calls,
// tool call ids, names and reasoning content pass through to the template.
func parseMessages(raws []json.RawMessage) ([]chattemplate.Message, *apiError) {
	if len(raws) == 0 {
		return nil, badRequest("messages", "messages must hold at least one message")
	}
	msgs := make([]chattemplate.Message, len(raws))
	for i, raw := range raws {
		param := fmt.Sprintf("messages[%d]", i)
		var m chatMessageIn
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, jsonError(param, err)
		}
		role, ok := chatRoles[m.Role]
		if !ok {
			if m.Role == "" {
				return nil, badRequest(param+".role", "%s.role is missing: want system, developer, user, assistant or tool", param)
			}
			return nil, badRequest(param+".role", "%s.role %q is unknown: want system, developer, user, assistant or tool", param, m.Role)
		}
		if e := checkNullContent(param, m); e != nil {
			return nil, e
		}
		content, e := parseContent(param+".content", m.Content)
		if e != nil {
			return nil, e
		}
		msgs[i] = chattemplate.Message{Role: role, Content: content, ReasoningContent: m.ReasoningContent,
			ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Name: m.Name}
	}
	return msgs, nil
}

// checkNullContent refuses a message without content, as OpenAI does, unless it is an
// assistant message that made tool calls: its content may be null (or left out).
func checkNullContent(param string, m chatMessageIn) *apiError {
	s := strings.TrimSpace(string(m.Content))
	if s != "" && s != "null" {
		return nil
	}
	var calls []json.RawMessage
	if m.Role == "assistant" && json.Unmarshal(m.ToolCalls, &calls) == nil && len(calls) > 0 {
		return nil
	}
	state := "null"
	if s == "" {
		state = "missing"
	}
	return badRequest(param+".content", "%s.content is %s: a %s message needs content, a string or an array of text parts; only an assistant message with tool_calls may leave it null", param, state, m.Role)
}

// parseContent reads a message's content: a string, null, or an array of text parts.
func parseContent(param string, raw json.RawMessage) (string, *apiError) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return "", nil
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return text, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badRequest(param, "%s must be a string or an array of text parts ({\"type\":\"text\",\"text\":\"…\"})", param)
	}
	texts := make([]string, len(parts))
	for i, p := range parts {
		if p.Type != "text" {
			return "", badRequest(fmt.Sprintf("%s[%d].type", param, i), "%s[%d] is a %q part: tfd serves a text model, so only text parts are supported", param, i, p.Type)
		}
		if p.Text == nil {
			return "", badRequest(fmt.Sprintf("%s[%d].text", param, i), "%s[%d].text is missing", param, i)
		}
		texts[i] = *p.Text
	}
	return strings.Join(texts, "\n"), nil
}

// chatFormat shapes chat completion responses and chunks.
type chatFormat struct {
	id       string
	created  int64
	model    string
	logprobs bool
	tools    *toolcall.Syntax // the model's, when the request offered tools: calls are taken out of the text
	oneCall  bool             // parallel_tool_calls false: a reply's first call only
	calls    *toolcall.Stream // the choice's calls held back while streaming, when tools is set
	sent     int              // the calls the choice's stream has sent
	index, n int              // the choice's index, of n
	// harmony reads the reply as GPT-OSS's channels (reasoning, content and, with harmonyCalls,
	// the calls of a request that offered tools); reader is the choice's own reader.
	harmony, harmonyCalls bool
	reader                *toolcall.Harmony
}

type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *usage       `json:"usage,omitempty"`
	TFD     *tfdInfo     `json:"tfd,omitempty"`
}

// chatChoice is a choice of a whole response (Message set) or of a chunk (Delta set). TFD is the
// choice's own tfd object, set when the response has several choices.
type chatChoice struct {
	Index        int           `json:"index"`
	Message      *chatMessage  `json:"message,omitempty"`
	Delta        *chatMessage  `json:"delta,omitempty"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
	TFD          *tfdInfo      `json:"tfd,omitempty"`
}

type chatMessage struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	// ReasoningContent is a harmony model's analysis channel (GPT-OSS's reasoning), as vLLM
	// returns it; set only where there is some.
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        []toolcall.Call `json:"tool_calls,omitempty"`
}

type chatLogprobs struct {
	Content []chatTokenLogprob `json:"content"`
}

// chatTokenLogprob is a chosen token's entry: its own figures and the likeliest tokens there.
type chatTokenLogprob struct {
	chatTopLogprob
	TopLogprobs []chatTopLogprob `json:"top_logprobs"`
}

// chatTopLogprob is one entry of top_logprobs; OpenAI's has no top_logprobs of its own.
type chatTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

func (f *chatFormat) logprobsOf(lps []tokenLogprob) *chatLogprobs {
	if !f.logprobs {
		return nil
	}
	out := &chatLogprobs{Content: make([]chatTokenLogprob, len(lps))}
	for i, lp := range lps {
		out.Content[i] = chatTokenLogprob{chatTopLogprob: chatLogprobOf(lp), TopLogprobs: make([]chatTopLogprob, len(lp.top))}
		for k, alt := range lp.top {
			out.Content[i].TopLogprobs[k] = chatLogprobOf(alt)
		}
	}
	return out
}

// chatLogprobOf is one token's figures, with the bytes of its text.
func chatLogprobOf(lp tokenLogprob) chatTopLogprob {
	b := make([]int, len(lp.token))
	for k := range len(lp.token) {
		b[k] = int(lp.token[k])
	}
	return chatTopLogprob{Token: lp.token, Logprob: lp.logprob, Bytes: b}
}

func (f *chatFormat) chunkOf(choices []chatChoice) *chatCompletion {
	return &chatCompletion{ID: f.id, Object: "chat.completion.chunk", Created: f.created, Model: f.model, Choices: choices}
}

func (f *chatFormat) responseID() string { return f.id }

func (f *chatFormat) choice(i, n int) replyFormat {
	c := *f
	c.index, c.n, c.calls, c.sent, c.reader = i, n, nil, 0, nil
	if f.tools != nil {
		c.calls = toolcall.NewStream(f.tools)
	}
	if f.harmony {
		c.reader = toolcall.NewHarmony(f.harmonyCalls)
	}
	return &c
}

func (f *chatFormat) first() any {
	empty := ""
	return f.chunkOf([]chatChoice{{Index: f.index, Delta: &chatMessage{Role: "assistant", Content: &empty}}})
}

func (f *chatFormat) chunk(text string, lps []tokenLogprob) []any {
	if f.reader != nil {
		return f.harmonyChunks(f.reader.Push(text), lps)
	}
	if f.calls == nil {
		return []any{f.chunkOf([]chatChoice{{Index: f.index, Delta: &chatMessage{Content: &text}, Logprobs: f.logprobsOf(lps)}})}
	}
	text, calls := f.calls.Push(text)
	var out []any
	if text != "" || len(lps) > 0 { // else held: it may be part of a tool call
		out = append(out, f.chunkOf([]chatChoice{{Index: f.index, Delta: &chatMessage{Content: &text}, Logprobs: f.logprobsOf(lps)}}))
	}
	return append(out, f.callChunks(calls)...)
}

// harmonyChunks returns the chunks that send what a piece of a harmony reply completed: its
// content and reasoning in one delta (with the logprobs of the piece's tokens, even when the piece
// is still held), then its calls.
func (f *chatFormat) harmonyChunks(p toolcall.Part, lps []tokenLogprob) []any {
	var out []any
	if p.Content != "" || p.Reasoning != "" || len(lps) > 0 {
		d := &chatMessage{Content: &p.Content}
		if p.Reasoning != "" {
			d.ReasoningContent = &p.Reasoning
		}
		out = append(out, f.chunkOf([]chatChoice{{Index: f.index, Delta: d, Logprobs: f.logprobsOf(lps)}}))
	}
	return append(out, f.callChunks(p.Calls)...)
}

// callChunks returns the chunks that send calls as OpenAI streams them, a delta with the call's
// index, id and name, then one with its arguments, numbering them after the calls already sent.
func (f *chatFormat) callChunks(calls []toolcall.Call) []any {
	if f.oneCall {
		calls = calls[:max(0, min(len(calls), 1-f.sent))]
	}
	var out []any
	for _, d := range toolcall.Deltas(calls, f.sent) {
		out = append(out, f.chunkOf([]chatChoice{{Index: f.index, Delta: &chatMessage{ToolCalls: d}}}))
	}
	f.sent += len(calls)
	return out
}

// final sends what was held back for tool calls: the text that is content after all, then the
// calls, then the finish reason.
func (f *chatFormat) final(finish string, info tfdInfo) []any {
	var out []any
	if f.reader != nil {
		out = f.harmonyChunks(f.reader.Finish(), nil)
		finish = toolFinish(finish, f.sent)
	}
	if f.calls != nil {
		content, calls := f.calls.Finish()
		if content != "" {
			out = append(out, f.chunkOf([]chatChoice{{Index: f.index, Delta: &chatMessage{Content: &content}}}))
		}
		out = append(out, f.callChunks(calls)...)
		finish = toolFinish(finish, f.sent)
	}
	c := f.chunkOf([]chatChoice{{Index: f.index, Delta: &chatMessage{}, FinishReason: &finish}})
	if f.n > 1 {
		c.Choices[0].TFD = &info
	} else {
		c.TFD = &info
	}
	return append(out, c)
}

// splitCalls takes the calls out of a whole reply, as many as the request allows.
func (f *chatFormat) splitCalls(text string) (string, []toolcall.Call) {
	content, calls := f.tools.Split(text)
	return content, f.limitCalls(calls)
}

// limitCalls keeps the first call only when the request set parallel_tool_calls false: tfd does
// not constrain what the model writes, so the calls after it are dropped.
func (f *chatFormat) limitCalls(calls []toolcall.Call) []toolcall.Call {
	if f.oneCall && len(calls) > 1 {
		return calls[:1]
	}
	return calls
}

// offersTools reports whether a chat request lets the model call tools: it lists some, and its
// tool_choice is not "none".
func offersTools(req *chatRequest) bool {
	var choice string
	_ = json.Unmarshal(req.ToolChoice, &choice) // an object names a function: tools are on
	return len(req.Tools) > 0 && choice != "none"
}

// toolFinish is the finish reason of a reply that made calls: "tool_calls" when it ended by
// itself, else what it was.
func toolFinish(finish string, calls int) string {
	if calls > 0 && finish == "stop" {
		return "tool_calls"
	}
	return finish
}

func (f *chatFormat) usage(u usage, info tfdInfo) any {
	c := f.chunkOf([]chatChoice{})
	c.Usage, c.TFD = &u, &info
	return c
}

func (f *chatFormat) whole(choices []wholeChoice, u usage, info tfdInfo) any {
	out := &chatCompletion{ID: f.id, Object: "chat.completion", Created: f.created, Model: f.model, Usage: &u, TFD: &info}
	for _, c := range choices {
		out.Choices = append(out.Choices, c.f.(*chatFormat).wholeChoice(c))
	}
	return out
}

// wholeChoice is c as a choice of a whole response; f is c's format.
func (f *chatFormat) wholeChoice(c wholeChoice) chatChoice {
	text, finish := c.text, c.finish
	msg := &chatMessage{Role: "assistant", Content: &text}
	if f.harmony {
		r := toolcall.NewHarmony(f.harmonyCalls)
		p := r.Push(text)
		p.Add(r.Finish())
		calls := f.limitCalls(p.Calls)
		msg.Content, msg.ToolCalls, finish = &p.Content, calls, toolFinish(finish, len(calls))
		if p.Reasoning != "" {
			msg.ReasoningContent = &p.Reasoning
		}
		if p.Content == "" && len(calls) > 0 {
			msg.Content = nil // OpenAI sends null content beside tool calls
		}
	}
	if f.tools != nil {
		content, calls := f.splitCalls(text)
		msg.ToolCalls, finish = calls, toolFinish(finish, len(calls))
		if msg.Content = &content; content == "" && len(calls) > 0 {
			msg.Content = nil // OpenAI sends null content beside tool calls
		}
	}
	out := chatChoice{Index: f.index, Message: msg, Logprobs: f.logprobsOf(c.logprobs), FinishReason: &finish}
	if f.n > 1 {
		out.TFD = &c.info
	}
	return out
}
