package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"tfd/daemon/config"
	"tfd/scheduler"
)

func TestPenaltyFields(t *testing.T) {
	withVocab := func(m *ServedModel, _ *HandlerOptions) { m.VocabSize = 1000 }
	chat := func(fields string) string {
		return `{"messages":[{"role":"user","content":"Hi"}]` + fields + `}`
	}
	t.Run("accepted", func(t *testing.T) {
		env := newTestEnv(t, withVocab)
		w := env.do("POST", "/v1/chat/completions", chat(`,"presence_penalty":-2,"frequency_penalty":1.5,"repetition_penalty":1.1,"logit_bias":{"7":-100,"999":100}`))
		decodeResponse(t, w)
		got := env.host.lastRequest(t).Sampling.Penalties
		want := scheduler.Penalties{Presence: -2, Frequency: 1.5, Repetition: 1.1, Bias: map[int32]float32{7: -100, 999: 100}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("penalties %+v, want %+v", got, want)
		}
	})
	for _, tc := range []struct{ name, fields, param, msg string }{
		{"presence over 2", `,"presence_penalty":2.5`, "presence_penalty", "from -2 to 2"},
		{"frequency under -2", `,"frequency_penalty":-3`, "frequency_penalty", "got -3"},
		{"frequency a string", `,"frequency_penalty":"x"`, "frequency_penalty", "a number"},
		{"repetition zero", `,"repetition_penalty":0`, "repetition_penalty", "above 0"},
		{"bias key not an id", `,"logit_bias":{"hello":1}`, "logit_bias", `"hello"`},
		{"bias key past the vocabulary", `,"logit_bias":{"1000":1}`, "logit_bias", "from 0 to 999"},
		{"bias key negative", `,"logit_bias":{"-1":1}`, "logit_bias", "token ids"},
		{"bias over 100", `,"logit_bias":{"5":101}`, "logit_bias", "from -100 to 100"},
		{"bias a string", `,"logit_bias":{"5":"up"}`, "logit_bias", "a number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
				body := chat(tc.fields)
				if path == "/v1/completions" {
					body = `{"prompt":"Hi"` + tc.fields + `}`
				}
				w := newTestEnv(t, withVocab).do("POST", path, body)
				var got errorBody
				if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != 400 {
					t.Fatalf("%s: status %d, body %s", path, w.Code, w.Body)
				}
				if deref(got.Error.Param) != tc.param || !strings.Contains(got.Error.Message, tc.msg) {
					t.Errorf("%s: param %q message %q, want param %q saying %q", path, deref(got.Error.Param), got.Error.Message, tc.param, tc.msg)
				}
			}
		})
	}
}

// TestRepetitionPenaltyDefaults: an unset repetition_penalty takes [sampling]'s, then the
// model's generation_config (as vLLM does), then 1 (off); the request's wins over both.
func TestRepetitionPenaltyDefaults(t *testing.T) {
	unset := config.Default().Sampling
	for _, tc := range []struct {
		name          string
		field         string
		config, model float64
		want          float32
	}{
		{"none anywhere", ``, -1, -1, 1},
		{"the model's", ``, -1, 1.05, 1.05},
		{"the config's over the model's", ``, 1.2, 1.05, 1.2},
		{"the request's over both", `,"repetition_penalty":1.3`, 1.2, 1.05, 1.3},
	} {
		env := newTestEnv(t, func(m *ServedModel, o *HandlerOptions) {
			o.Sampling, m.Defaults.RepetitionPenalty = unset, tc.model
			o.Sampling.RepetitionPenalty = tc.config
		})
		decodeResponse(t, env.do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}]`+tc.field+`}`))
		if got := env.host.lastRequest(t).Sampling.Penalties.Repetition; got != tc.want {
			t.Errorf("%s: repetition %v, want %v", tc.name, got, tc.want)
		}
	}
}
