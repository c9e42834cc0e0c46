package toolcall

import (
	"testing"
)

// TestHarmony: GPT-OSS's replies read whole and piece by piece (every split of the text into
// pieces of one to seven bytes): reasoning from the analysis channel, content from the final and
// commentary channels, calls from messages to functions.NAME (either order of recipient and
// channel, the call closed by the reply's end), and replies without harmony structure as they
// are.
func TestHarmony(t *testing.T) {
	type call struct{ name, args string }
	for _, tt := range []struct {
		name, reply        string
		calls              bool
		content, reasoning string
		want               []call
	}{
		{name: "reasoning then answer", calls: false,
			reply:     "<|channel|>analysis<|message|>User says hi.<|end|><|start|>assistant<|channel|>final<|message|>Hello!",
			reasoning: "User says hi.", content: "Hello!"},
		{name: "a call, recipient after the channel", calls: true,
			reply:     "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}",
			reasoning: "Need weather.", want: []call{{"get_weather", `{"city":"Paris"}`}}},
		{name: "a call, recipient before the channel", calls: true,
			reply: "<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{}<|end|>",
			want:  []call{{"get_time", `{}`}}},
		{name: "a preamble, then a call", calls: true,
			reply:   "<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": [1, 2]}",
			content: "Checking.", want: []call{{"f", `{"a":[1,2]}`}}},
		{name: "a call without tools offered is content", calls: false,
			reply:   "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}",
			content: "{\"a\": 1}"},
		{name: "a call whose arguments do not parse is content", calls: true,
			reply:   "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": ",
			content: "{\"a\": "},
		{name: "no harmony structure: a grammar's JSON", calls: true,
			reply: `{"answer": "<|message|> is text here"}`, content: `{"answer": "<|message|> is text here"}`},
		{name: "a reply cut inside a header", calls: false,
			reply: "<|channel|>analysis<|message|>Hm.<|end|><|start|>assistant<|channel|>fin", reasoning: "Hm.",
			content: "<|start|>assistant<|channel|>fin"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for size := 1; size <= 8; size++ {
				h := NewHarmony(tt.calls)
				var got Part
				if size == 8 { // the whole reply at once
					got.Add(h.Push(tt.reply))
				} else {
					for i := 0; i < len(tt.reply); i += size {
						got.Add(h.Push(tt.reply[i:min(i+size, len(tt.reply))]))
					}
				}
				got.Add(h.Finish())
				if got.Content != tt.content || got.Reasoning != tt.reasoning || len(got.Calls) != len(tt.want) {
					t.Fatalf("pieces of %d: content %q, reasoning %q, calls %+v; want %q, %q, %v", size, got.Content, got.Reasoning, got.Calls, tt.content, tt.reasoning, tt.want)
				}
				for i, c := range got.Calls {
					if c.Function.Name != tt.want[i].name || c.Function.Arguments != tt.want[i].args || c.Type != "function" || c.ID == "" {
						t.Errorf("pieces of %d: call %d = %+v, want %s(%s)", size, i, c, tt.want[i].name, tt.want[i].args)
					}
				}
			}
		})
	}
}

func TestIsHarmony(t *testing.T) {
	if !IsHarmony(`{{- "<|start|>assistant<|channel|>final<|message|>" + message.content + "<|end|>" }}`) {
		t.Error("GPT-OSS's assistant turn is not told as harmony")
	}
	if IsHarmony("<|im_start|>assistant\n{{ message.content }}<|im_end|>") {
		t.Error("ChatML is told as harmony")
	}
}
