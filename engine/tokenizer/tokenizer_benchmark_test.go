package tokenizer

import (
	"encoding/json"
	"go/build"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// benchSource returns about 100 KB of Go source: net/http's server.go from GOROOT, cut to size.
func benchSource(b *testing.B) string {
	b.Helper()
	src, err := os.ReadFile(filepath.Join(build.Default.GOROOT, "src", "net", "http", "server.go"))
	if err != nil {
		b.Skipf("no Go source to encode: %v", err)
	}
	return string(src[:min(len(src), 100_000)])
}

// benchTokenizers returns the tokenizers to measure: the bundled model's when present, and the
// Qwen2- and Llama 3-style fixtures (1,000-token vocabularies trained on Python source).
func benchTokenizers(b *testing.B) map[string]*Tokenizer {
	b.Helper()
	toks := map[string]*Tokenizer{}
	if data, err := os.ReadFile(oracleTokenizer); err == nil {
		tok, err := Load(data)
		if err != nil {
			b.Fatal(err)
		}
		toks["gopher"] = tok
	}
	for _, name := range []string{"qwen2", "llama3"} {
		tok, err := Load([]byte(readFixture(b, "testdata/hf/"+name+".json.gz").Tokenizer))
		if err != nil {
			b.Fatal(err)
		}
		toks[name] = tok
	}
	return toks
}

// BenchmarkEncode encodes ~100 KB of Go source: "warm" with the piece cache filled, as for a
// daemon that has seen such text before; "cold" with it emptied before every encoding.
func BenchmarkEncode(b *testing.B) {
	src := benchSource(b)
	for name, tok := range benchTokenizers(b) {
		b.Run(name+"/warm", func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			tok.Encode(src)
			b.ResetTimer()
			for b.Loop() {
				tok.Encode(src)
			}
			b.ReportMetric(float64(len(tok.Encode(src))), "tokens/op")
		})
		b.Run(name+"/cold", func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				tok.model.cache.reset()
				tok.Encode(src)
			}
		})
	}
}

// BenchmarkEncodeParallel encodes from all Ps at once, to show contention on the shared cache.
func BenchmarkEncodeParallel(b *testing.B) {
	src := benchSource(b)
	for name, tok := range benchTokenizers(b) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			tok.Encode(src)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					tok.Encode(src)
				}
			})
		})
	}
}

// BenchmarkDecode decodes the encoding of ~100 KB of Go source at once and token by token.
func BenchmarkDecode(b *testing.B) {
	src := benchSource(b)
	for name, tok := range benchTokenizers(b) {
		ids := tok.Encode(src)
		b.Run(name+"/whole", func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				tok.Decode(ids)
			}
		})
		b.Run(name+"/stream", func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				d := tok.NewDecoder()
				for _, id := range ids {
					d.Add(id)
				}
				d.Flush()
			}
		})
	}
}

// BenchmarkLoad loads a synthetic tokenizer.json the size of Qwen2's: 151,643 vocabulary tokens
// (the bytes and 151,387 merges of random pairs) and 22 added tokens.
func BenchmarkLoad(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	vocab := map[string]int{}
	var forms []string
	for c := range 256 {
		s := string(byteRunes[c])
		vocab[s] = len(forms)
		forms = append(forms, s)
	}
	var merges [][2]string
	for len(forms) < 151643 {
		l, r := forms[rng.IntN(len(forms))], forms[rng.IntN(256)]
		if _, ok := vocab[l+r]; ok || len(l) > 24 {
			continue
		}
		vocab[l+r] = len(forms)
		forms = append(forms, l+r)
		merges = append(merges, [2]string{l, r})
	}
	var added []addedTokenJSON
	for i := range 22 {
		added = append(added, addedTokenJSON{ID: int32(len(forms) + i), Content: "<|special_" + string(rune('a'+i)) + "|>", Special: true})
	}
	doc, err := json.Marshal(map[string]any{
		"added_tokens":  added,
		"normalizer":    json.RawMessage(`{"type": "NFC"}`),
		"pre_tokenizer": json.RawMessage(qwen2PreTokenizer),
		"decoder":       json.RawMessage(`{"type": "ByteLevel"}`),
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": merges},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := Load(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func (c *pieceCache) reset() {
	for i := range c.slots {
		c.slots[i].Store(nil)
	}
}
