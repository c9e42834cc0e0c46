package compute

import (
	"errors"
	"fmt"

	"tfd/quant"
)

// The quantized weight dtypes. A tensor of one is a matrix, [out, in] (more dimensions are rows
// of the last one), whose rows are a whole number of the format's blocks or groups; Upload takes
// its bytes in the format's own layout, so that a checkpoint's tensors pass through unchanged:
//
//   - Q8_0 and Q4_0 are GGUF's: each row is in/32 blocks of 34 or 18 bytes, an F16 scale and the
//     quants (package quant has the layouts).
//   - Q4_K and Q6_K are GGUF's K-quants: each row is in/256 super-blocks of 144 or 210 bytes
//     (package quant has the layouts).
//   - An affine dtype (see Affine) is MLX's: the packed codes of every row (in·bits/8 bytes a
//     row, as the uint32 words of `<name>.weight`), then the scales of every row ([out,
//     in/groupSize] in the scale dtype, `<name>.scales`), then the biases likewise
//     (`<name>.biases`): MLX's three tensors back to back.
//   - MXFP4 is GPT-OSS's (package quant has the format): the codes of every row (in/2 bytes a
//     row, openai's `_blocks`), then the E8M0 scales of every row (in/32 bytes a row, `_scales`).
//
// A stack of experts' matrices, [experts, out, in], is laid out as one matrix of experts·out rows
// (ExpertData gives one expert's).
//
// Only matrix products (MatMul, and ExpertMatMul for a stack of experts) and embedding lookups
// (Embed) read the GGUF and MLX dtypes; see Ops.MatMul for the arithmetic a backend must
// reproduce: an expert's pair is, bit for bit, MatMul of that expert's matrix on the pair's row.
// Only ExpertMatMul reads MXFP4, with F32 activations: its weights are exact in F32, so its
// products are those of the F32 weights, bit for bit.
const (
	Q8_0 DType = iota + 5
	Q4_0
	Q4_K
	Q6_K
	MXFP4
)

// An affine dtype carries its parameters in its bits: affineFlag, then the scale dtype (2 bits,
// an index into affineScales), the group size (2 bits, an index into affineGroups) and bits−1
// (3 bits).
const affineFlag DType = 0x80

var (
	affineScales = [...]DType{F32, F16, BF16}
	affineGroups = [...]int{32, 64, 128}
)

// ErrNoQuantizedKernels is wrapped by the Upload of a backend that cannot run quantized weights
// yet; errors.Is finds it.
var ErrNoQuantizedKernels = errors.New("compute: this backend has no kernels for quantized weights yet; the cpu backend runs them")

// Affine returns the dtype of MLX affine-quantized weights with bits bits a code (2, 3, 4, 5, 6
// or 8), groups of groupSize elements (32, 64 or 128) and scales and biases of dtype scales (F32,
// F16 or BF16), or an error naming what is not defined.
func Affine(bits, groupSize int, scales DType) (DType, error) {
	if err := (quant.Affine{Bits: bits, GroupSize: groupSize}).Check(); err != nil {
		return 0, err
	}
	d := affineFlag | DType(bits-1)
	for i, g := range affineGroups {
		if g == groupSize {
			d |= DType(i) << 3
		}
	}
	for i, s := range affineScales {
		if s == scales {
			return d | DType(i)<<5, nil
		}
	}
	return 0, fmt.Errorf("compute: affine scales and biases of %v: want F32, F16 or BF16", scales)
}

// AffineParams returns the parameters of an affine dtype; ok is false for any other dtype.
func (d DType) AffineParams() (f quant.Affine, scales DType, ok bool) {
	if d&affineFlag == 0 {
		return quant.Affine{}, 0, false
	}
	si, gi := int(d>>5)&3, int(d>>3)&3
	if si >= len(affineScales) || gi >= len(affineGroups) {
		return quant.Affine{}, 0, false
	}
	f = quant.Affine{Bits: int(d&7) + 1, GroupSize: affineGroups[gi]}
	if f.Check() != nil {
		return quant.Affine{}, 0, false
	}
	return f, affineScales[si], true
}

// Quantized reports whether d is a quantized weight dtype: Q8_0, Q4_0, Q4_K, Q6_K, MXFP4 or an
// affine one.
func (d DType) Quantized() bool {
	_, _, affine := d.AffineParams()
	return d == Q8_0 || d == Q4_0 || d == Q4_K || d == Q6_K || d == MXFP4 || affine
}

// Bytes returns the bytes of a tensor of dtype d and shape as Upload takes it, or an error for a
// shape the dtype cannot have (a negative dimension; for a quantized dtype, fewer than two
// dimensions or rows that are not a whole number of its blocks or groups).
func (d DType) Bytes(shape []int) (int, error) {
	n, err := Elements(shape)
	if err != nil {
		return 0, err
	}
	if !d.Quantized() {
		if d.Size() == 0 {
			return 0, fmt.Errorf("compute: unknown dtype %v", d)
		}
		return n * d.Size(), nil
	}
	if len(shape) < 2 {
		return 0, fmt.Errorf("compute: a %v tensor of shape %v: quantized tensors are matrices", d, shape)
	}
	in := shape[len(shape)-1]
	rows := 0
	if in > 0 {
		rows = n / in
	}
	unit, row := quant.BlockSize, 0
	switch d {
	case Q8_0:
		row = quant.RowBytesQ8_0(in)
	case Q4_0:
		row = quant.RowBytesQ4_0(in)
	case Q4_K:
		unit, row = quant.SuperBlockSize, quant.RowBytesQ4_K(in)
	case Q6_K:
		unit, row = quant.SuperBlockSize, quant.RowBytesQ6_K(in)
	case MXFP4:
		row = quant.MXFP4RowCodes(in) + quant.MXFP4RowScales(in)
	default:
		f, scales, _ := d.AffineParams()
		unit = f.GroupSize
		row = f.RowBytes(in) + 2*f.Groups(in)*scales.Size()
	}
	if in%unit != 0 {
		return 0, fmt.Errorf("compute: a %v tensor of shape %v: its rows must be a multiple of %d elements", d, shape, unit)
	}
	return rows * row, nil
}

func (d DType) quantizedString() string {
	switch d {
	case Q8_0:
		return "Q8_0"
	case Q4_0:
		return "Q4_0"
	case Q4_K:
		return "Q4_K"
	case Q6_K:
		return "Q6_K"
	case MXFP4:
		return "MXFP4"
	}
	if f, scales, ok := d.AffineParams(); ok {
		return fmt.Sprintf("AFFINE%d_G%d_%v", f.Bits, f.GroupSize, scales)
	}
	return ""
}

// ExpertData returns expert e's matrix, [out, in] as Upload takes it, of a quantized stack of
// experts' matrices of shape [experts, out, in] and its data (data's size checked by
// CheckUpload). A block format's matrices lie one after the other, so it is a part of data; an
// affine stack keeps every expert's codes, then every expert's scales, then every expert's
// biases, so its matrix is a new slice of the three parts.
func (d DType) ExpertData(shape []int, data []byte, e int) []byte {
	experts := shape[0]
	per := len(data) / max(experts, 1)
	f, scales, affine := d.AffineParams()
	if !affine {
		return data[e*per : (e+1)*per]
	}
	rows, in := shape[1], shape[2]
	codes, sb := rows*f.RowBytes(in), rows*f.Groups(in)*scales.Size()
	biases := data[experts*(codes+sb):]
	m := make([]byte, 0, codes+2*sb)
	m = append(m, data[e*codes:(e+1)*codes]...)
	m = append(m, data[experts*codes+e*sb:][:sb]...)
	return append(m, biases[e*sb:(e+1)*sb]...)
}
