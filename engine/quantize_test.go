package engine_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tfd/batch"
	"tfd/compute"
	"tfd/compute/computetest"
	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/engine/gguf"
	"tfd/engine/safetensors"
	"tfd/quant"
)

// refBackend is the cpu backend with the products of quantized matrices computed by package
// quant's reference, a row at a time, from the bytes Upload was given: the Go reference of the
// quantized arithmetic, against which the cpu kernels' whole forward is compared bit for bit.
type refBackend struct {
	compute.Backend
	refs    map[compute.Tensor]refMatrix
	experts map[compute.Tensor][]refMatrix // a quantized stack of experts' matrices, each apart
}

type refMatrix struct {
	dtype   compute.DType
	out, in int
	data    []byte
}

func newRefBackend(t testing.TB) *refBackend {
	return &refBackend{Backend: openCPU(t), refs: map[compute.Tensor]refMatrix{}, experts: map[compute.Tensor][]refMatrix{}}
}

func (b *refBackend) Upload(dtype compute.DType, shape []int, data []byte) (compute.Tensor, error) {
	w, err := b.Backend.Upload(dtype, shape, data)
	switch {
	case err != nil || !dtype.Quantized():
	case len(shape) == 3:
		// model.quantize makes Q8_0 and Q4_0, whose experts' matrices lie one after the other.
		per := len(data) / shape[0]
		for e := range shape[0] {
			b.experts[w] = append(b.experts[w], refMatrix{dtype, shape[1], shape[2], bytes.Clone(data[e*per : (e+1)*per])})
		}
	default:
		b.refs[w] = refMatrix{dtype, shape[0], shape[1], bytes.Clone(data)}
	}
	return w, err
}

// dot is quant's dot product of row o with a.
func (m refMatrix) dot(o int, a *quant.Activation) float32 {
	switch m.dtype {
	case compute.Q8_0:
		n := quant.RowBytesQ8_0(m.in)
		return quant.DotQ8_0(m.data[o*n:(o+1)*n], a)
	case compute.Q4_0:
		n := quant.RowBytesQ4_0(m.in)
		return quant.DotQ4_0(m.data[o*n:(o+1)*n], a)
	case compute.Q4_K:
		n := quant.RowBytesQ4_K(m.in)
		return quant.DotQ4_K(m.data[o*n:(o+1)*n], a)
	case compute.Q6_K:
		n := quant.RowBytesQ6_K(m.in)
		return quant.DotQ6_K(m.data[o*n:(o+1)*n], a)
	}
	f, sdt, _ := m.dtype.AffineParams()
	n, g, ss := f.RowBytes(m.in), f.Groups(m.in), sdt.Size()
	scales, biases := make([]float32, g), make([]float32, g)
	sd := m.data[m.out*n:]
	for j := range g {
		scales[j] = widen(sd[(o*g+j)*ss:], sdt)
		biases[j] = widen(sd[(m.out*g+o*g+j)*ss:], sdt)
	}
	return quant.DotAffine(f, m.data[o*n:(o+1)*n], scales, biases, a)
}

func widen(b []byte, dt compute.DType) float32 {
	switch dt {
	case compute.BF16:
		return quant.BF16ToF32(binary.LittleEndian.Uint16(b))
	case compute.F16:
		return quant.F16ToF32(binary.LittleEndian.Uint16(b))
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(b))
}

// MatMul computes a quantized product with quant (each row of x quantized, then each output's
// dot product plus the bias) and copies the result into dst with Gather, which moves bits
// unchanged; other products go to the cpu backend.
func (b *refBackend) MatMul(dst, x, w, bias compute.Tensor, rows int) {
	m, ok := b.refs[w]
	if !ok {
		b.Backend.MatMul(dst, x, w, bias, rows)
		return
	}
	xs := make([]float32, rows*m.in)
	must(b.Backend.ReadFloat32(x, xs))
	var bs []float32
	if bias != nil {
		bs = make([]float32, m.out)
		must(b.Backend.ReadFloat32(bias, bs))
	}
	res := make([]float32, rows*m.out)
	var a quant.Activation
	for r := range rows {
		a.Quantize(xs[r*m.in : (r+1)*m.in])
		for o := range m.out {
			v := m.dot(o, &a)
			if bs != nil {
				v += bs[o]
			}
			res[r*m.out+o] = v
		}
	}
	src, err := b.Backend.Upload(compute.F32, []int{rows, m.out}, computetest.F32Bytes(res))
	must(err)
	idx := make([]int32, rows)
	for i := range idx {
		idx[i] = int32(i)
	}
	index, err := b.Backend.Upload(compute.I32, []int{rows}, computetest.I32Bytes(idx))
	must(err)
	b.Backend.Gather(dst, src, index, rows)
	b.Backend.Free(src)
	b.Backend.Free(index)
}

// ExpertMatMul computes each listed pair's product with its expert's quantized matrix with quant,
// as MatMul does, and copies the result into dst with Gather; the rows of pairs in no run keep
// what dst held. Other products go to the cpu backend.
func (b *refBackend) ExpertMatMul(dst, x, w, bias, groups compute.Tensor, n, share int) {
	ms, ok := b.experts[w]
	if !ok {
		b.Backend.ExpertMatMul(dst, x, w, bias, groups, n, share)
		return
	}
	experts, out, in := len(ms), ms[0].out, ms[0].in
	xs, res := make([]float32, (n+share-1)/share*in), make([]float32, n*out)
	must(b.Backend.ReadFloat32(x, xs))
	must(b.Backend.ReadFloat32(dst, res))
	var bs []float32
	if bias != nil {
		bs = make([]float32, experts*out)
		must(b.Backend.ReadFloat32(bias, bs))
	}
	g := make([]int32, experts+1+n)
	must(b.Backend.ReadInt32(groups, g))
	var a quant.Activation
	for e := range experts {
		for _, p := range g[experts+1+int(g[e]) : experts+1+int(g[e+1])] {
			r := int(p) / share
			a.Quantize(xs[r*in : (r+1)*in])
			for o := range out {
				v := ms[e].dot(o, &a)
				if bs != nil {
					v += bs[e*out+o]
				}
				res[int(p)*out+o] = v
			}
		}
	}
	src, err := b.Backend.Upload(compute.F32, []int{n, out}, computetest.F32Bytes(res))
	must(err)
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(i)
	}
	index, err := b.Backend.Upload(compute.I32, []int{n}, computetest.I32Bytes(idx))
	must(err)
	b.Backend.Gather(dst, src, index, n)
	b.Backend.Free(src)
	b.Backend.Free(index)
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// quantPrompt is what the quantized models are run on: a prefill in one forward, then decode
// steps of one row each.
const quantPrompt = "func (b *Buffer) Write(p []byte) (int, error) {\n\tif len(p) > len(b.data)-b.len {"

// runLogits feeds tokens, the first prompt of them in one forward and the rest one row a
// forward, and returns every row's logits.
func runLogits(t testing.TB, m *engine.Model, tokens []int32, prompt int) [][]float32 {
	t.Helper()
	var out [][]float32
	v := m.Vocab()
	for start := 0; start < len(tokens); {
		n := 1
		if start == 0 {
			n = prompt
		}
		rows := make([]batch.Row, n)
		for i := range rows {
			rows[i] = batch.Row{Pos: start + i, Token: tokens[start+i], Logits: true}
		}
		logits, err := m.Forward(context.Background(), rows)
		if err != nil {
			t.Fatal(err)
		}
		for i := range rows {
			out = append(out, slices.Clone(logits[i*v:(i+1)*v]))
		}
		start += n
	}
	return out
}

// quantTokens returns quantPrompt's tokens followed by steps tokens m decodes greedily from it.
func quantTokens(t testing.TB, m *engine.Model, steps int) ([]int32, int) {
	prompt := m.Tokenizer().Encode(quantPrompt)
	return append(slices.Clone(prompt), enginetest.Greedy(t, m, prompt, steps)...), len(prompt)
}

// closeness compares rows of logits with the unquantized model's: the worst and the mean over
// rows of max|Δ| / max|logit|, and the share of rows whose argmax agrees.
func closeness(got, want [][]float32) (worst, mean, agree float64) {
	for i := range got {
		var diff, mag float64
		for j := range got[i] {
			diff = max(diff, math.Abs(float64(got[i][j]-want[i][j])))
			mag = max(mag, math.Abs(float64(want[i][j])))
		}
		worst = max(worst, diff/mag)
		mean += diff / mag / float64(len(got))
		if batch.Argmax(got[i]) == batch.Argmax(want[i]) {
			agree += 1 / float64(len(got))
		}
	}
	return worst, mean, agree
}

// TestQuantizedAtLoad: the bundled model quantized at load (q8, q4) gives, through the cpu
// kernels, exactly the logits of package quant's reference arithmetic, and logits within a stated
// bound of the unquantized model's (its BF16 weights in F32 arithmetic).
func TestQuantizedAtLoad(t *testing.T) {
	skipShort(t)
	// Every model is fed the same tokens: the prompt and what the unquantized model decodes.
	unquantized := enginetest.Load(t, openCPU(t), "models/gopher", engine.Options{MaxRows: 64})
	tokens, prompt := quantTokens(t, unquantized, 8)
	f32 := runLogits(t, unquantized, tokens, prompt)
	for _, c := range []struct {
		q     engine.Quantization
		bound float64 // of max|Δ| / max|logit| in any row
	}{{engine.QuantizeQ8, 0.03}, {engine.QuantizeQ4, 0.25}} {
		t.Run(string(c.q), func(t *testing.T) {
			opts := engine.Options{MaxRows: 64, Quantize: c.q}
			got := runLogits(t, enginetest.Load(t, openCPU(t), "models/gopher", opts), tokens, prompt)
			ref := newRefBackend(t)
			want := runLogits(t, enginetest.Load(t, ref, "models/gopher", opts), tokens, prompt)
			if len(ref.refs) == 0 {
				t.Fatal("the reference backend saw no quantized weights")
			}
			for i := range got {
				computetest.SameBits(t, fmt.Sprintf("row %d's logits", i), got[i], want[i])
			}
			worst, mean, agree := closeness(got, f32)
			t.Logf("%s against the unquantized model over %d rows: max|Δ|/max|logit| worst %.4f, mean %.4f; argmax agrees in %.0f%%", c.q, len(got), worst, mean, 100*agree)
			if worst > c.bound {
				t.Errorf("%s: max|Δ|/max|logit| reaches %.4f, above the bound %.2f", c.q, worst, c.bound)
			}
		})
	}
}

// mlxLayout gives the MLX affine quantization of each weight matrix of the bundled model in the
// MLX checkpoint the test writes: mixed, as mlx-lm's mixed recipes make them, so that loading
// reads each tensor's bits and group size from its shapes.
func mlxLayout(name string) (quant.Affine, bool) {
	switch {
	case name == "mtp.fc.weight":
		return quant.Affine{}, false // split at load; stays BF16
	case name == "model.embed_tokens.weight":
		return quant.Affine{Bits: 8, GroupSize: 64}, true
	case strings.HasSuffix(name, "mlp.down_proj.weight"):
		return quant.Affine{Bits: 6, GroupSize: 32}, true
	case strings.HasSuffix(name, "q_proj.weight"):
		return quant.Affine{Bits: 4, GroupSize: 128}, true
	}
	return quant.Affine{Bits: 4, GroupSize: 64}, true
}

// writeMLXCheckpoint writes the bundled model with its weight matrices quantized by
// quant.QuantizeAffine (MLX's algorithm), stored as mlx-community checkpoints store them
// (`<name>.weight` U32, `<name>.scales` and `<name>.biases` BF16, config.json's "quantization"),
// into a new folder, and returns it.
func writeMLXCheckpoint(t *testing.T) string {
	t.Helper()
	src := filepath.Join(enginetest.RepoRoot(t), "models", "gopher")
	ckpt, err := safetensors.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ckpt.Close()
	dir := t.TempDir()
	var out []safetensors.Tensor
	overrides := map[string]any{"group_size": 64, "bits": 4}
	for _, name := range ckpt.Names() {
		w, _ := ckpt.Tensor(name)
		f, ok := mlxLayout(name)
		if !ok || len(w.Shape) != 2 || w.DType != "BF16" {
			out = append(out, w)
			continue
		}
		if f != (quant.Affine{Bits: 4, GroupSize: 64}) {
			overrides[strings.TrimSuffix(name, ".weight")] = map[string]int{"group_size": f.GroupSize, "bits": f.Bits}
		}
		rows, in := w.Shape[0], w.Shape[1]
		packed := make([]byte, rows*f.RowBytes(in))
		scales, biases := make([]byte, 2*rows*f.Groups(in)), make([]byte, 2*rows*f.Groups(in))
		row := make([]float32, in)
		s, b := make([]float32, f.Groups(in)), make([]float32, f.Groups(in))
		for r := range rows {
			quant.WidenBF16(row, w.Data[2*r*in:2*(r+1)*in])
			quant.QuantizeAffine(f, packed[r*f.RowBytes(in):(r+1)*f.RowBytes(in)], s, b, row)
			for j := range s {
				binary.LittleEndian.PutUint16(scales[2*(r*len(s)+j):], quant.F32ToBF16(s[j]))
				binary.LittleEndian.PutUint16(biases[2*(r*len(s)+j):], quant.F32ToBF16(b[j]))
			}
		}
		base := strings.TrimSuffix(name, ".weight")
		out = append(out,
			safetensors.Tensor{Name: name, DType: "U32", Shape: []int{rows, in * f.Bits / 32}, Data: packed},
			safetensors.Tensor{Name: base + ".scales", DType: "BF16", Shape: []int{rows, f.Groups(in)}, Data: scales},
			safetensors.Tensor{Name: base + ".biases", DType: "BF16", Shape: []int{rows, f.Groups(in)}, Data: biases})
	}
	enginetest.WriteSafetensors(t, filepath.Join(dir, safetensors.SingleFile), out)

	var config map[string]any
	raw, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &config); err != nil {
		t.Fatal(err)
	}
	config["quantization"] = overrides
	if raw, err = json.Marshal(config); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"config.json": raw}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		if files[name], err = os.ReadFile(filepath.Join(src, name)); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestMLXCheckpoint: a checkpoint in MLX's affine format (the bundled model quantized with 4, 6
// and 8 bits in groups of 32, 64 and 128) loads its packed weights as they are, gives exactly the
// logits of package quant's reference arithmetic, and logits near the unquantized model's; the
// plan counts the file's bytes.
func TestMLXCheckpoint(t *testing.T) {
	skipShort(t)
	dir := writeMLXCheckpoint(t)
	_, info, err := engine.Inspect(engine.Source{Dir: dir}, engine.QuantizeQ8)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(info.DTypes, "U32") || info.Bytes != info.FileBytes-int64(bf16Bytes(t, "mtp.fc.weight"))+int64(quant.RowBytesQ8_0(384)*384*2) {
		t.Errorf("Inspect: dtypes %v, %d bytes as loaded of %d in the files: want U32 among the dtypes, and only mtp.fc.weight quantized at load", info.DTypes, info.Bytes, info.FileBytes)
	}

	unquantized := enginetest.Load(t, openCPU(t), "models/gopher", engine.Options{MaxRows: 64})
	tokens, _ := quantTokens(t, unquantized, 2)
	tokens, prompt := tokens[:8], 6 // MLX weights run in Go: a short run
	f32 := runLogits(t, unquantized, tokens, prompt)
	load := func(b compute.Backend) *engine.Model {
		m, err := engine.Load(context.Background(), engine.Source{Dir: dir}, b, engine.Options{MaxRows: 16})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		return m
	}
	got := runLogits(t, load(openCPU(t)), tokens, prompt)
	ref := newRefBackend(t)
	want := runLogits(t, load(ref), tokens, prompt)
	affine := map[string]int{}
	for _, m := range ref.refs {
		affine[m.dtype.String()]++
	}
	if len(affine) != 4 {
		t.Errorf("affine dtypes loaded: %v; want the four the checkpoint mixes", affine)
	}
	for i := range got {
		computetest.SameBits(t, fmt.Sprintf("row %d's logits", i), got[i], want[i])
	}
	worst, mean, agree := closeness(got, f32)
	t.Logf("MLX affine (4, 6, 8 bits) against the unquantized model over %d rows: max|Δ|/max|logit| worst %.4f, mean %.4f; argmax agrees in %.0f%%", len(got), worst, mean, 100*agree)
	if worst > 0.25 {
		t.Errorf("max|Δ|/max|logit| reaches %.4f, above the bound 0.25", worst)
	}
}

// bf16Bytes returns the bytes of a tensor of the bundled model.
func bf16Bytes(t *testing.T, name string) int {
	ckpt, err := safetensors.Open(filepath.Join(enginetest.RepoRoot(t), "models", "gopher"))
	if err != nil {
		t.Fatal(err)
	}
	defer ckpt.Close()
	w, _ := ckpt.Tensor(name)
	return len(w.Data)
}

// TestQuantizedGGUF: a BF16 GGUF file of the bundled model quantized at load gives the logits of
// the safetensors folder quantized at load, bit for bit (the same weights make the same blocks),
// and Inspect counts its tensors by the same rule: the embedding table (GGUF's token_embd) stays
// 8-bit under q4.
func TestQuantizedGGUF(t *testing.T) {
	skipShort(t)
	path := exportGGUF(t, bundled, compute.BF16)
	for _, q := range []engine.Quantization{engine.QuantizeQ8, engine.QuantizeQ4} {
		opts := engine.Options{MaxRows: 64, Quantize: q}
		folder := enginetest.Load(t, openCPU(t), "models/gopher", opts)
		tokens, prompt := quantTokens(t, folder, 4)
		m, err := engine.Load(context.Background(), engine.Source{Dir: path}, openCPU(t), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		want, got := runLogits(t, folder, tokens, prompt), runLogits(t, m, tokens, prompt)
		for i := range got {
			computetest.SameBits(t, fmt.Sprintf("%s: row %d's logits", q, i), got[i], want[i])
		}
		_, info, err := engine.Inspect(engine.Source{Dir: path}, q)
		if err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var size int64
		for _, w := range f.Tensors {
			switch {
			case len(w.Dims) == 1:
				size += int64(len(w.Data))
			case q == engine.QuantizeQ8 || w.Name == "token_embd.weight":
				size += w.Elements() / 32 * 34
			default:
				size += w.Elements() / 32 * 18
			}
		}
		f.Close()
		if info.Bytes != size {
			t.Errorf("%s: Inspect counts %d bytes as loaded, want %d", q, info.Bytes, size)
		}
	}
}

// TestQuantizedMoE: quantized at load, a mixture-of-experts model keeps its routers as they are
// (the router decides which experts run) and quantizes the rest, its experts' stacks among them
// where their rows are whole blocks, and its logits are still exactly the reference's, with the
// experts' products computed by quant a pair at a time.
func TestQuantizedMoE(t *testing.T) {
	const dir = "engine/testdata/oracle/qwen3moe"
	for _, q := range []engine.Quantization{engine.QuantizeQ8, engine.QuantizeQ4} {
		t.Run(string(q), func(t *testing.T) {
			opts := engine.Options{MaxRows: 16, Quantize: q}
			m := enginetest.Load(t, openCPU(t), dir, opts)
			ref := newRefBackend(t)
			mr := enginetest.Load(t, ref, dir, opts)
			// 4 layers of q, k, v and o; the one dense layer's gate, up and down; the embedding
			// table and the untied head; and the three sparse layers' gate and up stacks (their
			// down stacks' rows are the experts' 48 elements, no whole number of blocks).
			if len(ref.refs) != 4*4+3+2 || len(ref.experts) != 3*2 {
				t.Errorf("%d matrices and %d stacks of experts quantized, want 21 and 6", len(ref.refs), len(ref.experts))
			}
			tokens := []int32{3, 1, 4, 1, 5, 9, 2, 6, 5, 3}
			got, want := runLogits(t, m, tokens, 7), runLogits(t, mr, tokens, 7)
			for i := range got {
				computetest.SameBits(t, fmt.Sprintf("row %d's logits", i), got[i], want[i])
			}
		})
	}
}

// skipShort skips a test of many whole forwards over the bundled model's weights in the race pass
// of make test (-short), where the race detector slows its arithmetic tenfold: the cpu package's
// own tests take the worker pool through the race detector, and the oracle tests still run one
// forward after another there; the plain pass runs these in full.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("whole forwards of the bundled model; skipped with -short")
	}
}
