package safetensors

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"testing"
)

// file assembles a safetensors file from a header (JSON text, used verbatim so tests can write
// malformed ones) and the data area that follows it.
func file(header string, data []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(header)))
	b.WriteString(header)
	b.Write(data)
	return b.Bytes()
}

// seq returns n bytes 0, 1, 2, ... so a tensor's Data shows which bytes it was cut from.
func seq(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func TestParseValid(t *testing.T) {
	header := `{
		"__metadata__": {"format": "pt"},
		"w":     {"dtype": "F32",  "shape": [2, 2], "data_offsets": [0, 16]},
		"ids":   {"dtype": "I64",  "shape": [1],    "data_offsets": [16, 24]},
		"mask":  {"dtype": "BOOL", "shape": [2],    "data_offsets": [24, 26]},
		"empty": {"dtype": "F16",  "shape": [0, 4], "data_offsets": [26, 26]},
		"fp4":   {"dtype": "F4",   "shape": [4],    "data_offsets": [26, 28]},
		"s":     {"dtype": "BF16", "shape": [],     "data_offsets": [28, 30]}
	}  ` // the reference writer pads the header with spaces
	got, err := Parse("ok.safetensors", file(header, seq(30)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Tensor{
		"w":     {Name: "w", DType: "F32", Shape: []int{2, 2}, Data: seq(16)},
		"ids":   {Name: "ids", DType: "I64", Shape: []int{1}, Data: seq(24)[16:]},
		"mask":  {Name: "mask", DType: "BOOL", Shape: []int{2}, Data: []byte{24, 25}},
		"empty": {Name: "empty", DType: "F16", Shape: []int{0, 4}, Data: []byte{}},
		"fp4":   {Name: "fp4", DType: "F4", Shape: []int{4}, Data: []byte{26, 27}},
		"s":     {Name: "s", DType: "BF16", Shape: []int{}, Data: []byte{28, 29}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d tensors, want %d", len(got), len(want))
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("tensor %q missing", name)
			continue
		}
		if g.Name != w.Name || g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) || !bytes.Equal(g.Data, w.Data) {
			t.Errorf("tensor %q = %+v, want %+v", name, g, w)
		}
	}
	if cap(got["w"].Data) != 16 {
		t.Errorf("cap(Data) = %d, want 16: appending must not reach the next tensor", cap(got["w"].Data))
	}
}

func TestParseInvalid(t *testing.T) {
	const name = "bad.safetensors"
	tests := []struct {
		name string
		data []byte
		want []string // substrings of the error, besides the file name
	}{
		{"empty file", nil, []string{"0 bytes", "shorter than the 8-byte header length", "re-download"}},
		{"shorter than 8 bytes", []byte{1, 2, 3}, []string{"3 bytes", "shorter"}},
		{"header length beyond file", append(binary.LittleEndian.AppendUint64(nil, 1000), "{}"...),
			[]string{"header length 1000", "past the end of the 10-byte file", "re-download"}},
		{"header length absurd", append(binary.LittleEndian.AppendUint64(nil, 0x46554747), "GGUF"...),
			[]string{"header length 1179993927 exceeds the format's limit", "not a safetensors file"}},
		{"header not JSON", file(`{"w": {"dtype"`, nil), []string{"header is not a JSON object", "re-download"}},
		{"header a JSON array", file(`[1, 2]`, nil), []string{"header is not a JSON object"}},
		{"header null", file(`null`, nil), []string{"header is not a JSON object"}},
		{"entry not an object", file(`{"w": 5}`, nil), []string{`tensor "w"`, "malformed header entry"}},
		{"unknown dtype", file(`{"w": {"dtype": "F12", "shape": [1], "data_offsets": [0, 4]}}`, seq(4)),
			[]string{`tensor "w"`, `unknown dtype "F12"`, "BF16", "re-export"}},
		{"shape and span disagree", file(`{"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}}`, seq(12)),
			[]string{`tensor "w"`, "[2 2] of F32 needs 16 bytes", "[0, 12] span 12", "re-download"}},
		{"reversed offsets", file(`{"w": {"dtype": "U8", "shape": [4], "data_offsets": [8, 4]}}`, seq(8)),
			[]string{`tensor "w"`, "data_offsets [8 4]", "begin <= end"}},
		{"negative offset", file(`{"w": {"dtype": "U8", "shape": [4], "data_offsets": [-4, 0]}}`, seq(8)),
			[]string{`tensor "w"`, "data_offsets [-4 0]"}},
		{"one offset", file(`{"w": {"dtype": "U8", "shape": [4], "data_offsets": [4]}}`, seq(8)),
			[]string{`tensor "w"`, "data_offsets [4]"}},
		{"negative dimension", file(`{"w": {"dtype": "U8", "shape": [-1, -4], "data_offsets": [0, 4]}}`, seq(4)),
			[]string{`tensor "w"`, "impossible shape [-1 -4]"}},
		{"huge shape", file(`{"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}}`, seq(4)),
			[]string{`tensor "w"`, "impossible shape"}},
		{"sub-byte remainder", file(`{"w": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}`, seq(2)),
			[]string{`tensor "w"`, "not a whole number of bytes"}},
		{"overlap", file(`{
			"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
			"b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}`, seq(12)),
			[]string{`"a" [0, 8]`, `"b" [4, 12]`, "overlap", "re-download"}},
		{"offsets outside data area", file(`{
			"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
			"b": {"dtype": "F32", "shape": [2], "data_offsets": [64, 72]}}`, seq(16)),
			[]string{`tensor "b"`, "[64, 72] outside the 16-byte data area", "re-download"}},
		{"empty tensor outside data area", file(`{
			"a": {"dtype": "F32", "shape": [0], "data_offsets": [64, 64]}}`, seq(16)),
			[]string{`tensor "a"`, "[64, 64] outside"}},
		{"truncated", file(`{
			"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
			"b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}`, seq(13)),
			[]string{"truncated", "describes 24 bytes of tensor data but only 13", "11 missing", "re-download"}},
		{"truncated at a tensor boundary", file(`{
			"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
			"b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}`, seq(8)),
			[]string{"truncated", "16 missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(name, tt.data)
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			msg := err.Error()
			for _, w := range append([]string{"safetensors: " + name + ": "}, tt.want...) {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q\ndoes not contain %q", msg, w)
				}
			}
		})
	}
}
