package computetest

import (
	"fmt"
	"slices"
	"testing"

	"tfd/compute"
	"tfd/quant"
)

// QuantDTypes are the quantized dtypes the checks cover: GGUF's Q8_0, Q4_0, Q4_K and Q6_K, and
// MLX affine quantization of every width MLX defines, each group size and each scale dtype at
// least once.
func QuantDTypes(t testing.TB) []compute.DType {
	t.Helper()
	dts := []compute.DType{compute.Q8_0, compute.Q4_0, compute.Q4_K, compute.Q6_K}
	for _, p := range []struct {
		bits, group int
		scales      compute.DType
	}{{4, 32, compute.BF16}, {4, 64, compute.F16}, {4, 128, compute.F32}, {8, 32, compute.F16}, {8, 64, compute.BF16},
		{6, 64, compute.BF16}, {5, 32, compute.F16}, {3, 32, compute.F32}, {2, 128, compute.BF16}} {
		d, err := compute.Affine(p.bits, p.group, p.scales)
		if err != nil {
			t.Fatal(err)
		}
		dts = append(dts, d)
	}
	return dts
}

// QuantizedWeights returns out×in random weights quantized to dtype by package quant's
// quantizers, in the layout Upload takes (see compute.Q8_0), every eighth row scaled up 40 times
// so that blocks differ in scale. in must be a multiple of the dtype's block or group.
func QuantizedWeights(t testing.TB, dtype compute.DType, out, in int, seed uint64) []byte {
	t.Helper()
	w := Randn(seed, out*in)
	for r := 0; r < out; r += 8 {
		for i := range in {
			w[r*in+i] *= 40
		}
	}
	var quantize func(dst []byte, src []float32)
	var rowBytes int
	switch dtype {
	case compute.Q8_0:
		quantize, rowBytes = quant.QuantizeQ8_0, quant.RowBytesQ8_0(in)
	case compute.Q4_0:
		quantize, rowBytes = quant.QuantizeQ4_0, quant.RowBytesQ4_0(in)
	case compute.Q4_K:
		quantize, rowBytes = quant.QuantizeQ4_K, quant.RowBytesQ4_K(in)
	case compute.Q6_K:
		quantize, rowBytes = quant.QuantizeQ6_K, quant.RowBytesQ6_K(in)
	}
	if quantize != nil {
		data := make([]byte, out*rowBytes)
		for r := range out {
			quantize(data[r*rowBytes:(r+1)*rowBytes], w[r*in:(r+1)*in])
		}
		return data
	}
	f, scaleType, ok := dtype.AffineParams()
	if !ok {
		t.Fatalf("QuantizedWeights: %v is not a quantized dtype", dtype)
	}
	rowBytes, groups := f.RowBytes(in), f.Groups(in)
	packed := make([]byte, out*rowBytes)
	scales, biases := make([]float32, out*groups), make([]float32, out*groups)
	for r := range out {
		quant.QuantizeAffine(f, packed[r*rowBytes:(r+1)*rowBytes], scales[r*groups:(r+1)*groups], biases[r*groups:(r+1)*groups], w[r*in:(r+1)*in])
	}
	// The checkpoint keeps scales and biases in the model's dtype, as MLX does.
	data := append(packed, Encode(scaleType, scales)...)
	return append(data, Encode(scaleType, biases)...)
}

// QuantUnit returns the elements a row of dtype must be a multiple of: its block, super-block or
// group.
func QuantUnit(dtype compute.DType) int {
	if f, _, ok := dtype.AffineParams(); ok {
		return f.GroupSize
	}
	if dtype == compute.Q4_K || dtype == compute.Q6_K {
		return quant.SuperBlockSize
	}
	return quant.BlockSize
}

// QuantBatchLen is a row length of dtype, 1152 or the next multiple of its unit (1280 for the
// K-quants), whose 36 or 40 blocks of 32 fill whole batches of the blocks a GPU kernel loads
// ahead (32, 16, 8 or 4) and leave a rest, so that a check runs both of the kernels' loops.
func QuantBatchLen(dtype compute.DType) int {
	u := QuantUnit(dtype)
	return (1152 + u - 1) / u * u
}

// CheckQuantMatMul: MatMul with quantized weights of every QuantDTypes, with and without bias,
// bit for bit equal to the cpu backend, whose results are package quant's (its own tests check
// that). Row counts take every row group of a GPU's kernels and a ragged one past 16; columns
// leave partial groups; rows past rows stay untouched. Equal bits at every row count also show
// that a row's result does not depend on the rows beside it. QuantBatchLen's rows run both loops
// of the GPU kernels.
func CheckQuantMatMul(t *testing.T, p *Pair) {
	for _, dt := range QuantDTypes(t) {
		unit := QuantUnit(dt)
		for _, s := range []struct{ in, out int }{{unit, 5}, {3 * unit, 37}, {QuantBatchLen(dt), 130}} {
			for _, rows := range []int{1, 2, 3, 7, 16, 20} {
				for _, withBias := range []bool{false, true} {
					t.Run(fmt.Sprint(dt, s.in, s.out, rows, withBias), func(t *testing.T) {
						p.T = t
						testQuantMatMul(t, p, dt, s.in, s.out, rows, withBias)
					})
				}
			}
		}
	}
}

func testQuantMatMul(t *testing.T, p *Pair, dt compute.DType, in, out, rows int, withBias bool) {
	xs, bs := Randn(uint64(in+rows), rows*in), Randn(3, out)
	// A block of zeros and a block of one large value: the scales' edge cases.
	for i := range min(32, in) {
		xs[i] = 0
	}
	if rows > 1 && in >= 64 {
		xs[in+40] = 1e30
	}
	x := p.F32(xs, rows+1, in)
	w := p.Upload(dt, QuantizedWeights(t, dt, out, in, uint64(out)), out, in)
	dst := p.F32(nil, rows+1, out)
	var bias [2]compute.Tensor
	if withBias {
		bias = p.F32(bs, out)
	}
	p.Do(func(b compute.Backend, i int) { b.MatMul(dst[i], x[i], w[i], bias[i], rows) })
	g, c := p.Read(dst, (rows+1)*out)
	SameBits(t, "dst", g[:rows*out], c[:rows*out])
	SameBits(t, "the row past rows", g[rows*out:], make([]float32, out))
}

// CheckQuantEmbed: Embed from a quantized table of every QuantDTypes, bit for bit equal to the
// cpu backend (package quant's dequantization); a token outside the table is reported by Sync.
func CheckQuantEmbed(t *testing.T, p *Pair) {
	const vocab, rows = 50, 9
	ids := []int32{3, 49, 0, 7, 7, 12, 33, 1, 48}
	for _, dt := range QuantDTypes(t) {
		dim := 3 * QuantUnit(dt)
		t.Run(dt.String(), func(t *testing.T) {
			p.T = t
			table := p.Upload(dt, QuantizedWeights(t, dt, vocab, dim, 4), vocab, dim)
			tokens := p.I32(ids, rows)
			x := p.F32(nil, rows, dim)
			p.Do(func(b compute.Backend, i int) { b.Embed(x[i], table[i], tokens[i], rows) })
			g, c := p.Read(x, rows*dim)
			SameBits(t, "x", g, c)

			bad := p.I32([]int32{vocab}, 1)
			p.Do(func(b compute.Backend, i int) {
				b.Embed(x[i], table[i], bad[i], 1)
				if err := b.Sync(); err == nil {
					t.Errorf("%s: Embed of token %d from a table of %d: Sync reported nothing", b.Name(), vocab, vocab)
				}
			})
		})
	}
}

// QuantizedExperts returns a stack of experts random matrices of out×in weights quantized to
// dtype, in the layout Upload takes for [experts, out, in], and each expert's matrix alone as
// Upload takes [out, in] (QuantizedWeights of its own seed). The stack is put together here from
// the matrices, by the layout compute.Q8_0 describes, rather than split by the code under test:
// a block format's matrices one after the other, an affine format's codes of every expert, then
// their scales, then their biases.
func QuantizedExperts(t testing.TB, dtype compute.DType, experts, out, in int, seed uint64) (stack []byte, each [][]byte) {
	t.Helper()
	for e := range experts {
		each = append(each, QuantizedWeights(t, dtype, out, in, seed+uint64(e)))
	}
	f, scales, affine := dtype.AffineParams()
	if !affine {
		return slices.Concat(each...), each
	}
	codes, sb := out*f.RowBytes(in), out*f.Groups(in)*scales.Size()
	for _, part := range []struct{ at, n int }{{0, codes}, {codes, sb}, {codes + sb, sb}} {
		for _, m := range each {
			stack = append(stack, m[part.at:part.at+part.n]...)
		}
	}
	return stack, each
}

// CheckQuantExpertMatMul: ExpertMatMul with quantized experts of every QuantDTypes, with and
// without bias, bit for bit equal to the cpu backend's, whose pairs' rows are its quantized
// MatMul's of each expert's matrix (its own tests check that). Pairs per expert take every row
// group of a GPU's kernels and a ragged one past 16; columns leave partial groups; pair 0's id is
// no expert, so its row must stay as it was; QuantBatchLen's rows run both loops of the kernels.
func CheckQuantExpertMatMul(t *testing.T, p *Pair) {
	for _, dt := range QuantDTypes(t) {
		unit := QuantUnit(dt)
		for _, c := range []struct {
			in, out, pairs, experts, share int
			bias                           bool
		}{
			{unit, 5, 3, 2, 1, false}, {3 * unit, 37, 24, 8, 2, true}, {QuantBatchLen(dt), 20, 130, 4, 1, true},
			{QuantBatchLen(dt), 18, 40, 16, 8, false},
		} {
			t.Run(fmt.Sprint(dt, c), func(t *testing.T) {
				p.T = t
				testQuantExpertMatMul(t, p, dt, c.in, c.out, c.pairs, c.experts, c.share, c.bias)
			})
		}
	}
}

func testQuantExpertMatMul(t *testing.T, p *Pair, dt compute.DType, in, out, pairs, experts, share int, withBias bool) {
	ids := expertIDs(uint64(in+pairs), pairs, experts)
	ids[0] = int32(experts)
	cpu := p.Backends[1]
	groups := UploadI32(t, cpu, make([]int32, experts+1+pairs))
	cpu.GroupByExpert(groups, UploadI32(t, cpu, ids), pairs, experts)
	if err := cpu.Sync(); err == nil {
		t.Fatalf("GroupByExpert of expert %d of %d: no error", experts, experts)
	}
	g := readI32(t, cpu, groups, experts+1+pairs)
	xrows := (pairs + share - 1) / share
	xs, before := Randn(6, xrows*in), Randn(8, pairs*out)
	for i := range min(32, in) {
		xs[i] = 0 // a block of zeros: a zero scale
	}
	stack, _ := QuantizedExperts(t, dt, experts, out, in, uint64(out))
	w := p.Upload(dt, stack, experts, out, in)
	x, gt := p.F32(xs, xrows, in), p.I32(g, len(g))
	dst := p.F32(before, pairs, out)
	var bias [2]compute.Tensor
	if withBias {
		bias = p.F32(Randn(9, experts*out), experts, out)
	}
	p.Do(func(b compute.Backend, i int) { b.ExpertMatMul(dst[i], x[i], w[i], bias[i], gt[i], pairs, share) })
	got, want := p.Read(dst, pairs*out)
	SameBits(t, "the row of the pair in no run", got[:out], before[:out])
	SameBits(t, "dst", got, want)
}
