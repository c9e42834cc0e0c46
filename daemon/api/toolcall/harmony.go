package toolcall

import (
	"encoding/json"
	"strings"
)

// Harmony is GPT-OSS's reply format. A reply is a run of messages, each a header and a body:
//
//	<|channel|>analysis<|message|>Thinking…<|end|>
//	<|start|>assistant<|channel|>final<|message|>The answer.
//	<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}
//
// The header names the message's channel (analysis: the model's reasoning; final: the answer;
// commentary: preambles to the user, and calls) and, for a call, its recipient (to=functions.NAME,
// before or after the channel). A body ends at <|end|>, or where the reply ends: <|return|> and
// <|call|> end the generation itself (they are its stop tokens), so they never reach the text.
// The markers are special tokens, which a reply's text keeps for a harmony model (Markers).

// HarmonyMarkers are the harmony format's special tokens that a reply's text must keep for its
// messages to be told apart.
var HarmonyMarkers = []string{"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|constrain|>"}

const (
	harmonyMessage = "<|message|>"
	harmonyEnd     = "<|end|>"
	harmonyStart   = "<|start|>"
)

// IsHarmony reports whether a chat template writes the harmony format: GPT-OSS's template
// renders every assistant turn on a channel.
func IsHarmony(template string) bool {
	return strings.Contains(template, "<|channel|>") && strings.Contains(template, harmonyMessage)
}

// Part is what a piece of a harmony reply completes: text for the user (final and commentary
// channels), reasoning (the analysis channel), and calls that have come whole.
type Part struct {
	Content, Reasoning string
	Calls              []Call
}

// Add appends p's text and calls to q's: the parts of one reply, in order.
func (q *Part) Add(p Part) {
	q.Content += p.Content
	q.Reasoning += p.Reasoning
	q.Calls = append(q.Calls, p.Calls...)
}

// Harmony reads one harmony reply as its text comes. A reply that does not open with a header
// (a reply held to a grammar, say) is passed through as content. The zero value is not ready:
// use NewHarmony. It is not safe for concurrent use.
type Harmony struct {
	calls   bool            // take messages to functions.NAME as calls; else their bodies are content
	pending string          // text not yet placed: a header so far, or a body's tail that may begin a marker
	header  strings.Builder // the header of the message being read, before its <|message|>
	inBody  bool
	plain   bool   // the reply has no harmony structure: everything is content
	channel string // the current message's channel, once its header is read
	to      string // its recipient's function name, for a call
	args    strings.Builder
}

// NewHarmony returns a reader of one reply; calls says whether the request offered tools, so that
// messages to functions.NAME become calls.
func NewHarmony(calls bool) *Harmony { return &Harmony{calls: calls} }

// Push takes the next piece of the reply's text and returns what it completes.
func (h *Harmony) Push(text string) Part {
	if h.plain {
		return Part{Content: text}
	}
	h.pending += text
	var out Part
	for h.pending != "" {
		if !h.inBody {
			if !h.readHeader(&out) {
				break
			}
			continue
		}
		i, marker := firstOf(h.pending, harmonyEnd, harmonyStart)
		if i < 0 {
			keep := max(partialSuffix(h.pending, harmonyEnd), partialSuffix(h.pending, harmonyStart))
			out.Add(h.body(h.pending[:len(h.pending)-keep]))
			h.pending = h.pending[len(h.pending)-keep:]
			break
		}
		out.Add(h.body(h.pending[:i]))
		out.Add(h.endMessage())
		if marker == harmonyEnd {
			i += len(harmonyEnd)
		}
		h.pending = h.pending[i:]
	}
	return out
}

// readHeader moves pending text into the header until its <|message|>; it reports whether a
// body began. A reply whose first text is no header turns plain, its text content.
func (h *Harmony) readHeader(out *Part) bool {
	if h.header.Len() == 0 && !mayBeHeader(h.pending) {
		h.plain = true
		out.Content += h.pending
		h.pending = ""
		return false
	}
	i := strings.Index(h.pending, harmonyMessage)
	if i < 0 {
		keep := partialSuffix(h.pending, harmonyMessage)
		h.header.WriteString(h.pending[:len(h.pending)-keep])
		h.pending = h.pending[len(h.pending)-keep:]
		return false
	}
	h.header.WriteString(h.pending[:i])
	h.pending = h.pending[i+len(harmonyMessage):]
	h.channel, h.to = parseHeader(h.header.String())
	h.header.Reset()
	h.inBody = true
	return true
}

// mayBeHeader reports whether text can open a message's header: a marker, or a recipient.
func mayBeHeader(text string) bool {
	t := strings.TrimLeft(text, " ")
	for _, start := range []string{"<|", "to="} {
		if strings.HasPrefix(t, start) || strings.HasPrefix(start, t) {
			return true
		}
	}
	return false
}

// parseHeader returns a header's channel and, for a message to a function, the function's name.
func parseHeader(header string) (channel, to string) {
	if _, after, ok := strings.Cut(header, "<|channel|>"); ok {
		channel = headerWord(after)
	}
	if i := strings.Index(header, "to="); i >= 0 {
		if name, ok := strings.CutPrefix(headerWord(header[i+len("to="):]), "functions."); ok {
			to = name
		}
	}
	return channel, to
}

// headerWord returns text's first word: up to a space or a marker.
func headerWord(text string) string {
	end := strings.IndexAny(text, " <")
	if end < 0 {
		end = len(text)
	}
	return text[:end]
}

// body places text of the current message's body: a call's arguments are kept until the call
// ends, reasoning and content go out at once.
func (h *Harmony) body(text string) Part {
	switch {
	case text == "":
		return Part{}
	case h.to != "" && h.calls:
		h.args.WriteString(text)
		return Part{}
	case h.channel == "analysis":
		return Part{Reasoning: text}
	}
	return Part{Content: text}
}

// endMessage ends the current message; a call is complete at its end. A call whose arguments do
// not parse as a JSON object stays in the reply as content, as other syntaxes leave text that is
// no well-formed call.
func (h *Harmony) endMessage() Part {
	var out Part
	if h.inBody && h.to != "" && h.calls {
		args := h.args.String()
		if call, ok := newCall(openAICallID(), h.to, json.RawMessage(args)); ok {
			out.Calls = []Call{call}
		} else {
			out.Content = args
		}
	}
	h.inBody, h.channel, h.to = false, "", ""
	h.args.Reset()
	return out
}

// Finish returns what the reply's end completes: the body's held tail, a call that the end of
// the generation closed (<|call|> stops it), or a header that never opened a body, as content.
func (h *Harmony) Finish() Part {
	if h.plain {
		return Part{}
	}
	var out Part
	if h.inBody {
		out.Add(h.body(h.pending))
		out.Add(h.endMessage())
	} else if rest := h.header.String() + h.pending; strings.TrimSpace(rest) != "" {
		out.Content = rest
	}
	h.pending = ""
	h.header.Reset()
	return out
}

// firstOf returns where the first of markers stands in text, and which; -1 and "" if none does.
func firstOf(text string, markers ...string) (int, string) {
	at, which := -1, ""
	for _, m := range markers {
		if i := strings.Index(text, m); i >= 0 && (at < 0 || i < at) {
			at, which = i, m
		}
	}
	return at, which
}
