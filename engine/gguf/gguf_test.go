package gguf

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// sample builds a file that uses every value type, nested arrays, a custom alignment and tensors
// of plain and quantized types, one of them empty.
func sample(t testing.TB) (*Writer, []byte) {
	t.Helper()
	w := NewWriter()
	w.Set("general.architecture", String("qwen3"))
	w.Set(AlignmentKey, Uint32(64))
	w.Set("u8", Uint8(200))
	w.Set("i8", Int8(-100))
	w.Set("u16", Uint16(60000))
	w.Set("i16", Int16(-30000))
	w.Set("u32", Uint32(4000000000))
	w.Set("i32", Int32(-2000000000))
	w.Set("f32", Float32(1.5))
	w.Set("bool", Bool(true))
	w.Set("str", String("héllo\x00world"))
	w.Set("u64", Uint64(1<<63+5))
	w.Set("i64", Int64(-1<<62))
	w.Set("f64", Float64(-0.25))
	w.Set("strs", Strings([]string{"a", "", "Ġthe"}))
	w.Set("i32s", Int32s([]int32{1, -2, 3}))
	w.Set("u32s", Uint32s([]uint32{7}))
	w.Set("f32s", Float32s([]float32{0.5, -1}))
	w.Set("empty", Strings([]string{}))
	w.Set("nested", Value{typ: TypeArray, elem: TypeArray, v: []Value{Int32s([]int32{1, 2}), Strings([]string{"x"})}})
	w.Set("bools", Value{typ: TypeArray, elem: TypeBool, v: []bool{true, false}})
	w.AddTensor("token_embd.weight", F32, []int{3, 2}, seq(24))
	w.AddTensor("blk.0.attn_q.weight", Q8_0, []int{2, 32}, seq(2*34))
	w.AddTensor("empty", F16, []int{0, 4}, nil)
	w.AddTensor("scalar", F16, []int{}, seq(2))
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d", n, buf.Len())
	}
	return w, buf.Bytes()
}

// seq returns n bytes 1, 2, 3 … so that misplaced data shows.
func seq(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i + 1)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	w, data := sample(t)
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	parsed, err := Parse("sample", data)
	if err != nil {
		t.Fatal(err)
	}
	opened, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]*File{"Parse": parsed, "Open": opened} {
		t.Run(name, func(t *testing.T) {
			if f.Version != 3 || f.Alignment != 64 || f.DataOffset%64 != 0 {
				t.Errorf("version %d, alignment %d, data at %d", f.Version, f.Alignment, f.DataOffset)
			}
			if !reflect.DeepEqual(f.KV, w.kv) {
				t.Errorf("metadata:\n got %v\nwant %v", f.KV, w.kv)
			}
			if len(f.Tensors) != len(w.tensors) {
				t.Fatalf("%d tensors, want %d", len(f.Tensors), len(w.tensors))
			}
			for i, want := range w.tensors {
				got := f.Tensors[i]
				if got.Name != want.Name || got.Type != want.Type || !slices.Equal(got.Dims, want.Dims) ||
					got.Offset != want.Offset || !bytes.Equal(got.Data, want.Data) || got.Offset%64 != 0 {
					t.Errorf("tensor %d = %+v, want %+v", i, got, want)
				}
			}
			q, ok := f.Tensor("blk.0.attn_q.weight")
			if !ok || !slices.Equal(q.Shape(), []int{2, 32}) || !slices.Equal(q.Dims, []int64{32, 2}) || q.Elements() != 64 {
				t.Errorf("Tensor(attn_q) = %+v, %v; want shape [2 32], dims [32 2]", q, ok)
			}
			if v, ok := f.Lookup("u32"); !ok || v.Type() != TypeUint32 {
				t.Errorf("Lookup(u32) = %v, %v", v, ok)
			} else if n, ok := v.Int(); !ok || n != 4000000000 {
				t.Errorf("u32.Int() = %d, %v", n, ok)
			}
			if _, ok := f.Lookup("absent"); ok {
				t.Error("Lookup(absent) found a value")
			}
			if s, ok := mustLookup(t, f, "strs").Strings(); !ok || !slices.Equal(s, []string{"a", "", "Ġthe"}) {
				t.Errorf("strs = %q, %v", s, ok)
			}
			if s, ok := mustLookup(t, f, "i32s").Ints(); !ok || !slices.Equal(s, []int64{1, -2, 3}) {
				t.Errorf("i32s.Ints() = %v, %v", s, ok)
			}
			if _, ok := mustLookup(t, f, "u64").Int(); ok {
				t.Error("a u64 above the int64 range converted to an int64")
			}
			if got := mustLookup(t, f, "strs").Describe(); got != "arr[str] of 3" {
				t.Errorf("Describe() = %q", got)
			}
		})
	}
	// The writer reproduces a file it parsed, byte for byte.
	again := NewWriter()
	for _, kv := range parsed.KV {
		again.Set(kv.Key, kv.Value)
	}
	for _, tt := range parsed.Tensors {
		again.AddTensor(tt.Name, tt.Type, tt.Shape(), tt.Data)
	}
	var buf bytes.Buffer
	if _, err := again.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), data) {
		t.Error("writing a parsed file back gives other bytes")
	}
	if err := opened.Close(); err != nil {
		t.Fatal(err)
	}
	if err := opened.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func mustLookup(t *testing.T, f *File, key string) Value {
	t.Helper()
	v, ok := f.Lookup(key)
	if !ok {
		t.Fatalf("no metadata %q", key)
	}
	return v
}

// raw builds a file by hand, for the corruptions the Writer refuses to make.
type raw struct{ b []byte }

func (r *raw) u32(v uint32) *raw { r.b = binary.LittleEndian.AppendUint32(r.b, v); return r }
func (r *raw) u64(v uint64) *raw { r.b = binary.LittleEndian.AppendUint64(r.b, v); return r }
func (r *raw) str(s string) *raw { r.u64(uint64(len(s))); r.b = append(r.b, s...); return r }
func (r *raw) bytes(b ...byte) *raw {
	r.b = append(r.b, b...)
	return r
}

// head starts a version-3 file with the given counts.
func head(tensors, kvs uint64) *raw {
	r := &raw{b: []byte("GGUF")}
	return r.u32(3).u64(tensors).u64(kvs)
}

// withTensor is a file of one F32 tensor [2] at offset off, its data section holding data.
func withTensor(typ uint32, dims []uint64, off uint64, data int) []byte {
	r := head(1, 0).str("t").u32(uint32(len(dims)))
	for _, d := range dims {
		r.u64(d)
	}
	r.u32(typ).u64(off)
	for len(r.b)%32 != 0 {
		r.b = append(r.b, 0)
	}
	return append(r.b, make([]byte, data)...)
}

func TestParseRefusesCorruptFiles(t *testing.T) {
	_, valid := sample(t)
	tests := []struct {
		name string
		data []byte
		want []string
	}{
		{"empty", nil, []string{"0 bytes long, too short"}},
		{"not gguf", []byte("PK\x03\x04rest"), []string{`starts with "PK\x03\x04"`, "not a GGUF file"}},
		{"version 1", (&raw{b: []byte("GGUF")}).u32(1).b, []string{"version 1 is no longer read"}},
		{"version 4", (&raw{b: []byte("GGUF")}).u32(4).u64(0).u64(0).b, []string{"at offset 4", "version 4"}},
		{"big-endian", (&raw{b: []byte("GGUF")}).u32(3 << 24).b, []string{"big-endian"}},
		{"no counts", (&raw{b: []byte("GGUF")}).u32(3).b, []string{"at offset 8", "the tensor count needs 8 bytes, 0 are left"}},
		{"huge metadata count", head(0, 1<<60).b, []string{"at offset 16", "the metadata count is 1152921504606846976"}},
		{"empty key", head(0, 1).str("").u32(4).u32(1).b, []string{"at offset 24", "metadata key 0 is empty"}},
		{"duplicate key", head(0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(1).b,
			[]string{"at offset 41", `metadata key "k" appears twice`}},
		{"key past the end", head(0, 1).u64(100).bytes(make([]byte, 12)...).b, []string{"at offset 24", "metadata key 0 is 100 bytes long, but 12 are left"}},
		{"bad value type", head(0, 1).str("k").u32(13).u32(0).b, []string{"at offset 33", `metadata "k" has type 13`}},
		{"bool of 2", head(0, 1).str("k").u32(7).bytes(2).b, []string{"at offset 37", "bool of value 2"}},
		{"truncated value", head(0, 1).str("k").u32(10).u32(1).b, []string{"at offset 37", `metadata "k" needs 8 bytes, 4 are left`}},
		{"huge array", head(0, 1).str("k").u32(9).u32(8).u64(1 << 40).b, []string{"at offset 41", `metadata "k"'s length is 1099511627776`}},
		{"array of bad type", head(0, 1).str("k").u32(9).u32(99).u64(0).b, []string{"at offset 37", "array of type 99"}},
		{"arrays nested too deep", head(0, 1).str("k").u32(9).u32(9).u64(1).u32(9).u64(1).u32(9).u64(1).u32(9).u64(1).b,
			[]string{"nests arrays 5 deep"}},
		{"alignment not u32", head(0, 1).str(AlignmentKey).u32(5).u32(64).b, []string{"general.alignment is i32, must be u32"}},
		{"alignment not a power of two", head(0, 1).str(AlignmentKey).u32(4).u32(48).b, []string{"general.alignment is 48, not a power of two"}},
		{"five dimensions", head(1, 0).str("t").u32(5).bytes(make([]byte, 20)...).b, []string{"at offset 33", `tensor "t" has 5 dimensions`}},
		{"unknown ggml type", head(1, 0).str("t").u32(1).u64(2).u32(4).b, []string{"at offset 45", "ggml type 4, which ggml does not define"}},
		{"row not whole blocks", head(1, 0).str("t").u32(1).u64(33).u32(uint32(Q8_0)).b, []string{`tensor "t" is Q8_0, whose blocks hold 32 elements, but its rows hold 33`}},
		{"dimensions overflow", head(1, 0).str("t").u32(2).u64(1 << 40).u64(1 << 40).b, []string{"dimensions too large"}},
		{"misaligned offset", head(1, 0).str("t").u32(1).u64(2).u32(0).u64(4).b, []string{"at offset 49", "data offset 4 is not a multiple of the alignment 32"}},
		{"duplicate tensor", head(2, 0).str("t").u32(1).u64(1).u32(0).u64(0).str("t").b, []string{`tensor "t" appears twice`}},
		{"data past the end", withTensor(0, []uint64{2}, 0, 4), []string{`tensor "t" needs bytes [0, 8) of the data section at offset 64, but the file holds 4`}},
		{"overlap", (func() []byte {
			r := head(2, 0).str("a").u32(1).u64(16).u32(0).u64(0).str("b").u32(1).u64(8).u32(0).u64(32)
			for len(r.b)%32 != 0 {
				r.b = append(r.b, 0)
			}
			return append(r.b, make([]byte, 96)...)
		})(), []string{`tensors "a" [0, 64) and "b" [32, 64) overlap`}},
		{"truncated sample", valid[:len(valid)-63], []string{"needs bytes", "but the file holds"}},
		{"sample cut in the header", valid[:300], []string{"at offset", "are left"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("m.gguf", tt.data)
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", f)
			}
			for _, w := range append([]string{"gguf: m.gguf: "}, tt.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestWriterRefusesMisuse(t *testing.T) {
	tests := []struct {
		name string
		use  func(w *Writer)
		want string
	}{
		{"duplicate key", func(w *Writer) { w.Set("a", Bool(true)); w.Set("a", Bool(false)) }, `metadata key "a" is set twice`},
		{"empty key", func(w *Writer) { w.Set("", Bool(true)) }, "a metadata key is empty"},
		{"no value", func(w *Writer) { w.Set("a", Value{}) }, `metadata "a" has no value`},
		{"alignment after a tensor", func(w *Writer) {
			w.AddTensor("t", F32, []int{1}, seq(4))
			w.Set(AlignmentKey, Uint32(64))
		}, "set before any tensor"},
		{"alignment of 3", func(w *Writer) { w.Set(AlignmentKey, Uint32(3)) }, "power of two"},
		{"wrong data size", func(w *Writer) { w.AddTensor("t", F16, []int{2, 3}, seq(10)) }, `tensor "t" of F16 [2 3] needs 12 bytes, got 10`},
		{"duplicate tensor", func(w *Writer) {
			w.AddTensor("t", F32, []int{1}, seq(4))
			w.AddTensor("t", F32, []int{1}, seq(4))
		}, `tensor "t" is added twice`},
		{"partial block", func(w *Writer) { w.AddTensor("t", Q4_K, []int{1, 128}, seq(72)) }, "not whole Q4_K blocks of 256"},
		{"unknown type", func(w *Writer) { w.AddTensor("t", Type(5), []int{1}, seq(1)) }, "type 5, which ggml does not define"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWriter()
			tt.use(w)
			w.Set("after", Bool(true)) // a misuse sticks: later calls change nothing
			_, err := w.WriteTo(&bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("WriteTo = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestTypes(t *testing.T) {
	for _, tt := range []struct {
		typ          Type
		name         string
		block, bytes int
	}{
		{F32, "F32", 1, 4}, {BF16, "BF16", 1, 2}, {Q8_0, "Q8_0", 32, 34}, {Q4_0, "Q4_0", 32, 18},
		{Q4_K, "Q4_K", 256, 144}, {Q6_K, "Q6_K", 256, 210}, {Type(4), "type 4", 0, 0},
	} {
		if tt.typ.String() != tt.name || tt.typ.BlockSize() != tt.block || tt.typ.BlockBytes() != tt.bytes {
			t.Errorf("%d: %s, block %d of %d bytes; want %s, %d, %d", uint32(tt.typ), tt.typ,
				tt.typ.BlockSize(), tt.typ.BlockBytes(), tt.name, tt.block, tt.bytes)
		}
	}
}
