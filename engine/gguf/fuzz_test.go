package gguf

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzParse: whatever the bytes, Parse returns a File or an error starting "gguf: ", never
// panics, and a File it returns is consistent: every tensor's data is its size and inside the
// file, and writing the File back and parsing that gives the same metadata and tensors (compared
// as the bytes they write). The seed corpus (a valid file, its truncations and hand-made
// corruptions) runs with every `go test`.
func FuzzParse(f *testing.F) {
	_, valid := sample(f)
	f.Add(valid)
	for _, n := range []int{0, 4, 8, 24, 100, 300, len(valid) - 1} {
		f.Add(valid[:n])
	}
	f.Add(head(0, 1).str("k").u32(9).u32(9).u64(2).u32(8).u64(1).str("a").u32(4).u64(1).u32(7).b)
	f.Add(withTensor(uint32(Q8_0), []uint64{32, 2}, 0, 68))
	f.Add(withTensor(0, []uint64{2, 0}, 32, 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "gguf: fuzz: ") {
				t.Fatalf("error %q does not start with the package and file", err)
			}
			return
		}
		for _, tt := range file.Tensors {
			if int64(len(tt.Data)) != tt.Type.RowBytes(tt.Elements()) {
				t.Fatalf("tensor %q holds %d bytes, its shape needs %d", tt.Name, len(tt.Data), tt.Type.RowBytes(tt.Elements()))
			}
			if tt.Offset%int64(file.Alignment) != 0 || file.DataOffset+tt.Offset+int64(len(tt.Data)) > int64(len(data)) {
				t.Fatalf("tensor %q at %d+%d, %d bytes: misplaced in a %d-byte file", tt.Name, file.DataOffset, tt.Offset, len(tt.Data), len(data))
			}
		}
		written := rewrite(t, file)
		again, err := Parse("again", written)
		if err != nil {
			t.Fatalf("parsing a file written back: %v", err)
		}
		if len(again.KV) != len(file.KV) || len(again.Tensors) != len(file.Tensors) {
			t.Fatalf("written back, %d keys and %d tensors became %d and %d", len(file.KV), len(file.Tensors), len(again.KV), len(again.Tensors))
		}
		// Compared as bytes rather than values, so that NaNs compare equal.
		if !bytes.Equal(rewrite(t, again), written) {
			t.Fatal("a file written back and parsed again writes other bytes")
		}
	})
}

// rewrite writes f's metadata and tensors with a Writer.
func rewrite(t *testing.T, f *File) []byte {
	w := NewWriter()
	for _, kv := range f.KV {
		w.Set(kv.Key, kv.Value)
	}
	for _, tt := range f.Tensors {
		w.AddTensor(tt.Name, tt.Type, tt.Shape(), tt.Data)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatalf("writing back a parsed file: %v", err)
	}
	return buf.Bytes()
}
