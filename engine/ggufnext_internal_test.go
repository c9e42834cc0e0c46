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

	"tfd/compute"
	"tfd/engine/safetensors"
)

// TestGGUFNextTensorsAsTheHub: every tensor of the Qwen3-Next fixture, read by its Hub name from
// the GGUF files llama.cpp's converter wrote of it (F32, F16 and Q8_0), is the folder's tensor in
// the Hub's layout and shape, converted as the converter converts it: the same bytes in F32, the
// F16 rounding in F16, ggml's Q8_0 blocks of the same rows in Q8_0 (so every row the loader moved
// is the row the Hub has there); the norms the folder's 1 + w in F32; A_log a value whose exp,
// rounded to F32, is the file's −ssm_a (how many are the checkpoint's own is logged).
func TestGGUFNextTensorsAsTheHub(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	folder, err := safetensors.Open(filepath.Join(root, "engine", "testdata", "oracle", "qwen3next"))
	if err != nil {
		t.Fatal(err)
	}
	defer folder.Close()
	hub := safetensorsCheckpoint{folder}
	for _, dtype := range []string{"f32", "f16", "q8_0"} {
		t.Run(dtype, func(t *testing.T) {
			path := filepath.Join(root, "engine", "testdata", "qwen3next-gguf", "qwen3next-"+dtype+".gguf")
			if _, err := os.Stat(path); err != nil {
				t.Skipf("%v: tools/fixtures/make_qwen3next_gguf.py writes it with llama.cpp's converter", err)
			}
			g, err := openGGUF(path)
			if err != nil {
				t.Fatal(err)
			}
			defer g.close()
			types := map[compute.DType]int{}
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
				case !slices.Equal(got.shape, want.shape):
					t.Fatalf("%s: GGUF's shape %v, the folder's %v", name, got.shape, want.shape)
				}
				types[got.dtype]++
				if strings.HasSuffix(name, ".A_log") {
					checkALog(t, g, name, got, want)
					continue
				}
				if isNextNorm(name) {
					if want, err = plusOne(want); err != nil {
						t.Fatal(err)
					}
				}
				wantData := want.data
				switch {
				case got.dtype.Quantized():
					wantData = quantizeTensor(want, got.dtype)
				case got.dtype != want.dtype:
					wantData = convertFloats(want.data, want.dtype, got.dtype)
				}
				if !bytes.Equal(got.data, wantData) {
					t.Errorf("%s: GGUF's %s (%v) is not the folder's tensor in %v", name, g.fileName(name), got.dtype, got.dtype)
				}
			}
			t.Logf("tensors by type: %v", types)
		})
	}
}

// checkALog checks A_log read from a GGUF file (got) against the file's ssm_a and the folder's
// A_log (want).
func checkALog(t *testing.T, g *ggufCheckpoint, name string, got, want stored) {
	t.Helper()
	ssmA, _, err := g.plainTensor(nextMTPLayerName(name, g.cfg.Layers))
	if err != nil {
		t.Fatal(err)
	}
	f32 := func(b []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) }
	for i := range len(got.data) / 4 {
		x, a, w := f32(got.data, i), f32(ssmA.data, i), f32(want.data, i)
		if float32(math.Exp(float64(x))) != -a {
			t.Errorf("%s[%d]: exp(%v) is %v, the file's −ssm_a %v", name, i, x, math.Exp(float64(x)), -a)
		}
		if x != w {
			t.Logf("%s[%d]: read back as %v, the checkpoint's %v (whose exp rounds to %v, the file's A %v)", name, i, x, w, float32(math.Exp(float64(w))), -a)
		}
	}
}
