package engine

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tfd/engine/safetensors"
)

// TestGGUFNextTensorsAsTheHub: every tensor of the Qwen3-Next fixture, read by its Hub name from
// the F32 GGUF llama.cpp's converter wrote of it, is the folder's tensor: the same shape and
// bytes, the norms the folder's 1 + w in F32; A_log a value whose exp, rounded to F32, is the
// file's −ssm_a (how many are the checkpoint's own is logged).
func TestGGUFNextTensorsAsTheHub(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "engine", "testdata", "qwen3next-gguf", "qwen3next-f32.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%v: tools/fixtures/make_qwen3next_gguf.py writes it with llama.cpp's converter", err)
	}
	g, err := openGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	folder, err := safetensors.Open(filepath.Join(root, "engine", "testdata", "oracle", "qwen3next"))
	if err != nil {
		t.Fatal(err)
	}
	defer folder.Close()
	hub := safetensorsCheckpoint{folder}
	var aLogs, aLogsExact int
	for _, name := range folder.Names() {
		want, _, err := hub.tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		got, ok, err := g.tensor(name)
		switch {
		case err != nil:
			t.Fatalf("%s: %v", name, err)
		case !ok:
			t.Fatalf("%s: the GGUF file has no %s", name, g.fileName(name))
		case !slices.Equal(got.shape, want.shape) || got.dtype != want.dtype:
			t.Fatalf("%s: GGUF %v %v, the folder %v %v", name, got.dtype, got.shape, want.dtype, want.shape)
		}
		if isNextNorm(name) {
			if want, err = plusOne(want); err != nil {
				t.Fatal(err)
			}
		}
		if strings.HasSuffix(name, ".A_log") {
			ssmA, _, err := g.plainTensor(nextMTPLayerName(name, g.cfg.Layers))
			if err != nil {
				t.Fatal(err)
			}
			for i := range len(got.data) / 4 {
				x := math.Float32frombits(binary.LittleEndian.Uint32(got.data[4*i:]))
				a := math.Float32frombits(binary.LittleEndian.Uint32(ssmA.data[4*i:]))
				w := math.Float32frombits(binary.LittleEndian.Uint32(want.data[4*i:]))
				if float32(math.Exp(float64(x))) != -a {
					t.Errorf("%s[%d]: exp(%v) is %v, the file's −ssm_a %v", name, i, x, math.Exp(float64(x)), -a)
				}
				aLogs++
				if x == w {
					aLogsExact++
				} else {
					t.Logf("%s[%d]: read back as %v, the checkpoint's %v (whose exp rounds to %v)", name, i, x, w, float32(math.Exp(float64(w))))
				}
			}
			continue
		}
		if !bytes.Equal(got.data, want.data) {
			t.Errorf("%s: GGUF's %s differs from the folder's", name, g.fileName(name))
		}
	}
	t.Logf("A_log: %d of %d values read back bit for bit", aLogsExact, aLogs)
}
