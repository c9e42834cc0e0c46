package engine

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// sparseCheckpoint lists the BF16 tensors of a checkpoint for the plan tests, which read only
// config.json and the safetensors header: write makes a model.safetensors whose data is a hole
// (the file has its full size, but nothing past the header is written, so it takes no room on
// disk).
type sparseCheckpoint struct {
	header map[string]sparseTensor
	size   int64 // bytes of data listed so far
}

type sparseTensor struct {
	DType       string   `json:"dtype"`
	Shape       []int    `json:"shape"`
	DataOffsets [2]int64 `json:"data_offsets"`
}

// add lists a BF16 tensor of that shape after the ones before it.
func (s *sparseCheckpoint) add(name string, shape ...int) {
	if s.header == nil {
		s.header = map[string]sparseTensor{}
	}
	n := int64(2)
	for _, d := range shape {
		n *= int64(d)
	}
	s.header[name] = sparseTensor{"BF16", shape, [2]int64{s.size, s.size + n}}
	s.size += n
}

// write puts config and the listed tensors' model.safetensors into dir.
func (s *sparseCheckpoint) write(t *testing.T, dir, config string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(s.header)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(js)))
	if _, err := f.Write(append(n[:], js...)); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(8+len(js)) + s.size); err != nil {
		t.Fatal(err)
	}
}
