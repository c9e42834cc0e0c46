package cpu

import (
	"encoding/binary"
	"math"

	"tfd/compute"
	"tfd/quant"
)

// qweights is a quantized matrix (Q8_0, Q4_0, Q4_K, Q6_K or MLX affine) as the cpu backend keeps
// it. Its rows go in groups of eight (Q8_0, Q4_0) or four (the others), the last group padded with
// zero rows, and the rows of a group are interleaved unit by unit: the kernels compute a group's
// output columns together, so they read one stream, in order. A unit is a block of 32 elements of
// the group's rows (Q8_0, Q4_0), two blocks (4-bit affine), a super-block of 256 (Q4_K, Q6_K: see
// qkquants.go) or one quantization group of them (other affine):
//
//	Q8_0:   the eight rows' F16 scales (16 bytes), then for each k < 8 a 32-byte word holding the
//	        eight rows' quants 4k…4k+3, row c in bytes 4c…4c+3 (272 bytes): ggml's repacked
//	        layout, in which a row of activations meets word k with its own four quants 4k…4k+3
//	        broadcast, and each 32-bit lane ends the block with its column's whole integer sum,
//	        the block order's (package quant).
//	Q4_0:   the eight rows' F16 scales (16 bytes), then for each k < 4 a 32-byte word holding the
//	        rows' quant bytes 4k…4k+3 as GGUF has them (the low nibbles elements 4k…4k+3, the
//	        high ones 4k+16…4k+19), row c in bytes 4c…4c+3 (144 bytes).
//	affine: 8 bits: a block's codes, the four rows' 32 bytes each (128 bytes); 4 bits: two
//	        blocks' codes, the four rows' 32 bytes each, byte j holding element j of the first
//	        block in its low nibble and element j of the second in its high nibble (128 bytes);
//	        other widths: a quantization group's codes of the four rows, packed as MLX packs
//	        them (4·GroupSize·Bits/8 bytes). The scales and biases, in the checkpoint's dtype,
//	        are in sb: per quantization group the four rows' scales, then their biases.
//
// So a matrix takes the bytes of its checkpoint tensors and no more, beyond the padding.
type qweights struct {
	dtype   compute.DType
	affine  quant.Affine // affine only
	out, in int
	width   int    // rows a group: 8 (Q8_0, Q4_0) or 4
	units   int    // units a group: blocks (Q8_0, Q4_0, 8-bit affine), pairs of blocks (4-bit affine), super-blocks (Q4_K, Q6_K) or quantization groups (other affine)
	unit    int    // bytes of one unit
	data    []byte // groups × units × unit bytes
	qgroups int    // affine only: quantization groups a row
	sb      []byte // affine only: groups × qgroups × 8 scales and biases of dtype sdt
	sdt     compute.DType
}

// Bytes a unit of eight rows takes, per format.
const (
	q8Unit = 16 + 8*quant.BlockSize
	q4Unit = 16 + 4*quant.BlockSize
)

func (q *qweights) groups() int { return (q.out + q.width - 1) / q.width }

// group returns the units of group g (rows width·g … width·g+width−1) and, for affine weights,
// their scales and biases.
func (q *qweights) group(g int) ([]byte, []byte) {
	n := q.units * q.unit
	w := q.data[g*n : (g+1)*n]
	if q.sb == nil {
		return w, nil
	}
	m := q.qgroups * 8 * q.sdt.Size()
	return w, q.sb[g*m : (g+1)*m]
}

// scaleBias returns the scale and the bias of column c of unit u of a group's affine sb.
func (q *qweights) scaleBias(sb []byte, u, c int) (scale, bias float32) {
	ss := q.sdt.Size()
	at := (8*u + c) * ss
	return widenScale(sb[at:at+ss], q.sdt), widenScale(sb[at+4*ss:at+5*ss], q.sdt)
}

// newQWeights rearranges a quantized matrix, in the layout Upload takes (see compute.Q8_0), into
// the backend's. The caller has checked data's size against the dtype and shape.
func newQWeights(dtype compute.DType, shape []int, data []byte) *qweights {
	in := shape[len(shape)-1]
	out := 1
	for _, d := range shape[:len(shape)-1] {
		out *= d
	}
	q := &qweights{dtype: dtype, out: out, in: in, width: 4}
	if dtype == compute.Q8_0 || dtype == compute.Q4_0 {
		q.width = 8
	}
	groups := q.groups()
	switch dtype {
	case compute.Q8_0, compute.Q4_0:
		blockBytes, quants := quant.Q8_0BlockBytes, quant.BlockSize
		q.units, q.unit = in/quant.BlockSize, q8Unit
		if dtype == compute.Q4_0 {
			blockBytes, quants, q.unit = quant.Q4_0BlockBytes, quant.BlockSize/2, q4Unit
		}
		q.data = make([]byte, groups*q.units*q.unit)
		for r := range out {
			g, c := r/8, r%8
			for u := range q.units {
				src := data[(r*q.units+u)*blockBytes : (r*q.units+u+1)*blockBytes]
				dst := q.data[(g*q.units+u)*q.unit:]
				copy(dst[2*c:2*c+2], src[:2])
				for k := range quants / 4 {
					copy(dst[16+32*k+4*c:16+32*k+4*c+4], src[2+4*k:2+4*k+4])
				}
			}
		}
	case compute.Q4_K, compute.Q6_K:
		q.newKQuant(data)
	default:
		q.newAffine(shape, data)
	}
	return q
}

// newAffine lays out an affine matrix (see qweights).
func (q *qweights) newAffine(shape []int, data []byte) {
	f, scales, _ := q.dtype.AffineParams()
	out, in := q.out, q.in
	nb := in / quant.BlockSize
	q.affine, q.sdt, q.qgroups = f, scales, f.Groups(in)
	switch f.Bits {
	case 8:
		q.units, q.unit = nb, 4*quant.BlockSize
	case 4:
		q.units, q.unit = (nb+1)/2, 4*quant.BlockSize
	default:
		q.units, q.unit = q.qgroups, 4*f.GroupSize*f.Bits/8
	}
	q.data = make([]byte, q.groups()*q.units*q.unit)
	rowBytes, ss := f.RowBytes(in), scales.Size()
	q.sb = make([]byte, q.groups()*q.qgroups*8*ss)
	scaleData := data[out*rowBytes:]
	biasData := scaleData[out*q.qgroups*ss:]
	var codes [quant.BlockSize]uint8
	for r := range out {
		g, i := r/4, r%4
		w := q.data[g*q.units*q.unit : (g+1)*q.units*q.unit]
		row := data[r*rowBytes : (r+1)*rowBytes]
		for u := range q.qgroups {
			at, to := (r*q.qgroups+u)*ss, ((g*q.qgroups+u)*8+i)*ss
			copy(q.sb[to:to+ss], scaleData[at:at+ss])
			copy(q.sb[to+4*ss:to+5*ss], biasData[at:at+ss])
		}
		switch f.Bits {
		case 8, 4:
			for b := range nb {
				for j := range codes {
					codes[j] = quant.Code(row, b*quant.BlockSize+j, f.Bits)
				}
				if f.Bits == 8 {
					copy(w[b*q.unit+i*quant.BlockSize:], codes[:])
					continue
				}
				dst := w[b/2*q.unit+i*quant.BlockSize:]
				for j, n := range codes {
					dst[j] |= n << (4 * (b % 2))
				}
			}
		default:
			codeBytes := f.GroupSize * f.Bits / 8
			for u := range q.qgroups {
				copy(w[u*q.unit+i*codeBytes:], row[u*codeBytes:(u+1)*codeBytes])
			}
		}
	}
}

// blockCodes writes the 32 codes of block b of column c of an affine group (its units w), in
// element order, into n.
func (q *qweights) blockCodes(n *[quant.BlockSize]uint8, w []byte, b, c int) {
	f := q.affine
	switch f.Bits {
	case 8:
		copy(n[:], w[b*q.unit+c*quant.BlockSize:])
	case 4:
		shift := 4 * uint(b%2)
		for j, v := range w[b/2*q.unit+c*quant.BlockSize : b/2*q.unit+(c+1)*quant.BlockSize] {
			n[j] = v >> shift & 15
		}
	default:
		codeBytes := f.GroupSize * f.Bits / 8
		perGroup := f.GroupSize / quant.BlockSize
		u := b / perGroup
		packed := w[u*q.unit+c*codeBytes : u*q.unit+(c+1)*codeBytes]
		for j := range n {
			n[j] = quant.Code(packed, b%perGroup*quant.BlockSize+j, f.Bits)
		}
	}
}

// widenScale returns the F32 value of one little-endian element of dtype (F32, F16 or BF16).
func widenScale(b []byte, dtype compute.DType) float32 {
	switch dtype {
	case compute.F16:
		return quant.F16ToF32(binary.LittleEndian.Uint16(b))
	case compute.BF16:
		return quant.BF16ToF32(binary.LittleEndian.Uint16(b))
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(b))
}

// row writes row r's values into dst (in elements), dequantized as package quant does.
func (q *qweights) row(dst []float32, r int) {
	w, sb := q.group(r / q.width)
	i := r % q.width
	switch q.dtype {
	case compute.Q4_K, compute.Q6_K:
		q.kRow(dst, w, i)
	case compute.Q8_0, compute.Q4_0:
		var n [quant.BlockSize]int8
		for u := range q.units {
			d := quant.F16ToF32(binary.LittleEndian.Uint16(w[u*q.unit+2*i:]))
			q.blockQuants(&n, w[u*q.unit:(u+1)*q.unit], i)
			for j, v := range n {
				dst[u*quant.BlockSize+j] = float32(v) * d
			}
		}
	default:
		var n [quant.BlockSize]uint8
		for b := range q.in / quant.BlockSize {
			q.blockCodes(&n, w, b, i)
			scale, bias := q.scaleBias(sb, b*quant.BlockSize/q.affine.GroupSize, i)
			for j, v := range n {
				dst[b*quant.BlockSize+j] = float32(scale*float32(v)) + bias // as quant.DequantizeAffine
			}
		}
	}
}

// blockQuants writes the 32 quants of column c of one Q8_0 or Q4_0 unit (see qweights), in
// element order, into n; a Q4_0 quant is its nibble − 8.
func (q *qweights) blockQuants(n *[quant.BlockSize]int8, unit []byte, c int) {
	if q.dtype == compute.Q8_0 {
		for k := range 8 {
			for i, v := range unit[16+32*k+4*c : 16+32*k+4*c+4] {
				n[4*k+i] = int8(v)
			}
		}
		return
	}
	for k := range 4 {
		for i, v := range unit[16+32*k+4*c : 16+32*k+4*c+4] {
			n[4*k+i], n[16+4*k+i] = int8(v&15)-8, int8(v>>4)-8
		}
	}
}
