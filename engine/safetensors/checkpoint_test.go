package safetensors

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// Two small shards and the index that joins them, shared by the checkpoint tests.
var (
	shardA = file(`{"a.weight": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
		"a.bias": {"dtype": "BF16", "shape": [2], "data_offsets": [8, 12]}}`, seq(12))
	shardB    = file(`{"b.weight": {"dtype": "F16", "shape": [3], "data_offsets": [0, 6]}}`, seq(6))
	indexJSON = []byte(`{"metadata": {"total_size": 18}, "weight_map": {
		"a.weight": "model-00001-of-00002.safetensors",
		"a.bias": "model-00001-of-00002.safetensors",
		"b.weight": "model-00002-of-00002.safetensors"}}`)
	sharded = map[string][]byte{
		IndexFile:                          indexJSON,
		"model-00001-of-00002.safetensors": shardA,
		"model-00002-of-00002.safetensors": shardB,
	}
)

// writeDir writes files into a fresh temporary folder and returns it.
func writeDir(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// opener runs each checkpoint test against both Open (on a temporary folder) and OpenFS.
var openers = []struct {
	name string
	open func(t *testing.T, files map[string][]byte) (*Checkpoint, error)
}{
	{"Open", func(t *testing.T, files map[string][]byte) (*Checkpoint, error) { return Open(writeDir(t, files)) }},
	{"OpenFS", func(t *testing.T, files map[string][]byte) (*Checkpoint, error) {
		fsys := fstest.MapFS{}
		for name, data := range files {
			fsys[name] = &fstest.MapFile{Data: data}
		}
		return OpenFS(fsys)
	}},
}

func TestOpen(t *testing.T) {
	tests := []struct {
		name  string
		files map[string][]byte
		want  map[string][]byte // tensor name -> data
	}{
		{"single file", map[string][]byte{SingleFile: shardA},
			map[string][]byte{"a.bias": {8, 9, 10, 11}, "a.weight": seq(8)}},
		{"sharded", sharded,
			map[string][]byte{"a.bias": {8, 9, 10, 11}, "a.weight": seq(8), "b.weight": seq(6)}},
		{"single file wins over index", map[string][]byte{SingleFile: shardB, IndexFile: indexJSON},
			map[string][]byte{"b.weight": seq(6)}},
	}
	for _, o := range openers {
		for _, tt := range tests {
			t.Run(o.name+"/"+tt.name, func(t *testing.T) {
				c, err := o.open(t, tt.files)
				if err != nil {
					t.Fatal(err)
				}
				wantNames := slices.Sorted(maps.Keys(tt.want))
				if got := c.Names(); !slices.Equal(got, wantNames) {
					t.Errorf("Names() = %q, want %q", got, wantNames)
				}
				for name, data := range tt.want {
					tensor, ok := c.Tensor(name)
					if !ok || tensor.Name != name || !bytes.Equal(tensor.Data, data) {
						t.Errorf("Tensor(%q) = %+v, %v; want data %v", name, tensor, ok, data)
					}
				}
				if _, ok := c.Tensor("nope"); ok {
					t.Error(`Tensor("nope") found a tensor`)
				}
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				if _, ok := c.Tensor(wantNames[0]); ok {
					t.Error("Tensor found a tensor after Close")
				}
				if err := c.Close(); err != nil {
					t.Errorf("second Close: %v", err)
				}
			})
		}
	}
}

func TestOpenInvalid(t *testing.T) {
	with := func(name string, data []byte) map[string][]byte {
		files := map[string][]byte{}
		for k, v := range sharded {
			files[k] = v
		}
		if data == nil {
			delete(files, name)
		} else {
			files[name] = data
		}
		return files
	}
	tests := []struct {
		name  string
		files map[string][]byte
		want  []string
	}{
		{"no weights", map[string][]byte{"config.json": []byte("{}")},
			[]string{"holds no weights", SingleFile, IndexFile}},
		{"empty single file", map[string][]byte{SingleFile: {}},
			[]string{SingleFile + ": file is 0 bytes"}},
		{"corrupt single file", map[string][]byte{SingleFile: file(`{"w": 1}`, nil)},
			[]string{SingleFile + `: tensor "w"`}},
		{"missing shard", with("model-00002-of-00002.safetensors", nil),
			[]string{IndexFile, `shard "model-00002-of-00002.safetensors"`, "missing from", "download all"}},
		{"tensor absent from its shard", with("model-00002-of-00002.safetensors",
			file(`{"c.weight": {"dtype": "F16", "shape": [3], "data_offsets": [0, 6]}}`, seq(6))),
			[]string{IndexFile, `tensor "b.weight"`, "model-00002-of-00002.safetensors", "no such tensor"}},
		{"tensor in two shards", with("model-00002-of-00002.safetensors", shardA),
			[]string{"also appears in another shard"}},
		{"truncated shard", with("model-00001-of-00002.safetensors", shardA[:len(shardA)-2]),
			[]string{"model-00001-of-00002.safetensors: file is truncated", "2 missing"}},
		{"index not JSON", with(IndexFile, []byte("{")),
			[]string{IndexFile, "not valid JSON"}},
		{"index without weight_map", with(IndexFile, []byte(`{"metadata": {}}`)),
			[]string{IndexFile, "weight_map"}},
		{"shard outside the folder", with(IndexFile, []byte(`{"weight_map": {"a.weight": "../x.safetensors"}}`)),
			[]string{`shard "../x.safetensors"`, "not a file inside"}},
	}
	for _, o := range openers {
		for _, tt := range tests {
			t.Run(o.name+"/"+tt.name, func(t *testing.T) {
				c, err := o.open(t, tt.files)
				if err == nil {
					c.Close()
					t.Fatal("open succeeded, want an error")
				}
				msg := err.Error()
				for _, w := range append([]string{"safetensors: "}, tt.want...) {
					if !strings.Contains(msg, w) {
						t.Errorf("error %q\ndoes not contain %q", msg, w)
					}
				}
			})
		}
	}
}

func TestOpenNamesFolder(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(dir)
	if err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("Open(empty folder) = %v, want an error naming %s", err, dir)
	}
	_, err = Open(filepath.Join(dir, "absent"))
	if err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("Open(absent folder) = %v, want an error naming it", err)
	}
}

// TestOpenFSNotExist checks that a missing shard in an fs.FS is told apart from other read
// errors the same way as on disk.
func TestOpenFSNotExist(t *testing.T) {
	fsys := fstest.MapFS{IndexFile: {Data: indexJSON}}
	_, err := OpenFS(fsys)
	if err == nil || !strings.Contains(err.Error(), "missing from") {
		t.Errorf("OpenFS = %v, want a missing-shard error", err)
	}
}
