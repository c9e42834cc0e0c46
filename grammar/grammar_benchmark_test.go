package grammar

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// syntheticVocab makes n tokens shaped like a Qwen-size byte-level BPE vocabulary: every byte,
// then words with and without a leading space, digit runs, punctuation clusters that cross
// JSON's structure (`":"`, `"},`), indented newlines, and multi-byte UTF-8 (whole and split).
func syntheticVocab(n int) [][]byte {
	r := rand.New(rand.NewPCG(3, 4))
	seen := map[string]bool{}
	var out [][]byte
	add := func(t string) {
		if !seen[t] {
			seen[t] = true
			out = append(out, []byte(t))
		}
	}
	for b := range 256 {
		add(string([]byte{byte(b)}))
	}
	letters := "etaoinshrdlcumwfgypbvkjxqzETAOINSHRDLCUM_"
	punct := `"{}[]:,.;!?'()<>/\-=+*&%$#@` + "`"
	for len(out) < n {
		var t []byte
		switch k := r.IntN(20); {
		case k < 11: // a word
			if r.IntN(2) == 0 {
				t = append(t, ' ')
			}
			for range 1 + r.IntN(9) {
				t = append(t, letters[r.IntN(len(letters))])
			}
		case k < 13: // punctuation, maybe with a word
			for range 1 + r.IntN(3) {
				t = append(t, punct[r.IntN(len(punct))])
			}
			if r.IntN(2) == 0 {
				t = append(t, letters[r.IntN(26)])
			}
		case k < 14: // whitespace
			t = append(t, '\n')
			for range r.IntN(12) {
				t = append(t, ' ')
			}
		case k < 15:
			t = append(t, "0123456789"[r.IntN(10)])
			t = append(t, "0123456789"[r.IntN(10)])
		default: // CJK or accented text, sometimes cut inside a character
			for range 1 + r.IntN(3) {
				t = append(t, string(rune(0x4e00+r.IntN(0x5000)))...)
			}
			if r.IntN(4) == 0 {
				t = t[:len(t)-1]
			}
		}
		add(string(t))
	}
	out[0] = nil // a special token
	return out
}

// benchStates are the states a JSON reply passes through, from the start to inside a string.
func benchStates(b *testing.B, g *Grammar) map[string]State {
	states := map[string]State{}
	for name, prefix := range map[string]string{
		"start": ``, "key": `{"na`, "value": `{"name":`, "string": `{"name":"Ann`, "number": `{"name":"Ann","age":4`,
	} {
		s, ok := g.Start().StepBytes([]byte(prefix))
		if !ok {
			b.Fatalf("prefix %s refused", prefix)
		}
		states[name] = s
	}
	return states
}

func BenchmarkAllowed(b *testing.B) {
	g, err := Compile([]byte(`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},"required":["name","age"]}`))
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{8192, 151936} {
		v := NewVocab(syntheticVocab(size))
		mask := make([]uint64, (v.Size()+63)/64)
		for name, s := range benchStates(b, g) {
			b.Run(name+"/"+strconv.Itoa(size), func(b *testing.B) {
				for b.Loop() {
					v.Allowed(s, mask)
				}
			})
		}
		any := AnyObject()
		s, _ := any.Start().StepBytes([]byte(`{"a":[1,{"b":"x`))
		b.Run("anyobject-string/"+strconv.Itoa(size), func(b *testing.B) {
			for b.Loop() {
				v.Allowed(s, mask)
			}
		})
	}
}

func BenchmarkNewVocab(b *testing.B) {
	tokens := syntheticVocab(151936)
	for b.Loop() {
		NewVocab(tokens)
	}
}
