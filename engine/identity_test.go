package engine_test

import (
	"context"
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"tfd/compute"
	"tfd/engine"
	"tfd/engine/safetensors"
	"tfd/models"
)

// renamed is a backend under another name.
type renamed struct{ compute.Backend }

func (renamed) Name() string { return "renamed" }

// computingAs is a backend that says it computes in the named way (compute.Arithmetic).
type computingAs struct {
	compute.Backend
	way string
}

func (c computingAs) Arithmetic() string { return c.way }

// TestIdentity: two loads of the bundled model agree on its identity, from the embedded folder
// and from a copy on disk; one weight byte changed, another backend name or way of computing, or
// quantizing at load changes it.
func TestIdentity(t *testing.T) {
	b := openCPU(t)
	quantize := engine.NoQuantization
	identity := func(src engine.Source, b compute.Backend) string {
		t.Helper()
		m, err := engine.Load(context.Background(), src, b, engine.Options{Context: 64, MaxRows: 4, Quantize: quantize})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		return m.Identity()
	}
	bundled := engine.Source{FS: models.FS(), Name: models.Name}
	want := identity(bundled, b)
	if len(want) != 64 {
		t.Fatalf("Identity = %q, want 64 hex digits", want)
	}
	if got := identity(bundled, b); got != want {
		t.Errorf("a second load: identity %s, the first %s", got, want)
	}
	dir := copyBundled(t)
	if got := identity(engine.Source{Dir: dir}, b); got != want {
		t.Errorf("a copy on disk: identity %s, the embedded folder's %s", got, want)
	}
	if got := identity(bundled, renamed{b}); got == want {
		t.Error("another backend name left the identity unchanged")
	}
	one, other := identity(bundled, computingAs{b, "one way"}), identity(bundled, computingAs{b, "another"})
	if one == want || other == want || one == other {
		t.Error("a backend's way of computing (compute.Arithmetic) left the identity unchanged")
	}
	for _, quantize = range []engine.Quantization{engine.QuantizeQ8, engine.QuantizeQ4} {
		if got := identity(bundled, b); got == want {
			t.Errorf("model.quantize = %s left the identity unchanged", quantize)
		}
	}
	quantize = engine.NoQuantization
	name := flipFirstWeightByte(t, filepath.Join(dir, "model-00001-of-00003.safetensors"))
	if got := identity(engine.Source{Dir: dir}, b); got == want {
		t.Errorf("a changed first byte of %s left the identity unchanged", name)
	}
}

// copyBundled copies the bundled model's folder into a temporary folder and returns its path.
func copyBundled(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	err := fs.WalkDir(models.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(models.FS(), path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, path), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// flipFirstWeightByte inverts the first byte of a safetensors file's tensor data and returns the
// name of the tensor that holds it.
func flipFirstWeightByte(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := 8 + int(binary.LittleEndian.Uint64(data))
	tensors, err := safetensors.Parse(path, data)
	if err != nil {
		t.Fatal(err)
	}
	name := ""
	for n, ts := range tensors {
		if len(ts.Data) > 0 && unsafe.SliceData(ts.Data) == &data[at] {
			name = n
		}
	}
	if name == "" {
		t.Fatalf("premise: no tensor of %s starts where its data does", path)
	}
	data[at] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}
