package quant

import "encoding/binary"

// DotQ8_0 returns the dot product of the Q8_0 row w with the quantized activations a, in the
// block order the package doc defines. len(w) must be RowBytesQ8_0(len(a.Q)).
func DotQ8_0(w []byte, a *Activation) float32 {
	n := len(a.Q)
	checkRow("Q8_0", n, len(w), RowBytesQ8_0(n))
	var acc float32
	for b := range n / BlockSize {
		blk := w[b*Q8_0BlockBytes : (b+1)*Q8_0BlockBytes]
		f := float32(F16ToF32(binary.LittleEndian.Uint16(blk)) * a.D[b])
		x := a.Q[b*BlockSize : (b+1)*BlockSize]
		var s int32
		for j, v := range x {
			s += int32(int8(blk[2+j])) * int32(v)
		}
		acc = FMA32(f, float32(s), acc)
	}
	return acc
}

// DotQ4_0 returns the dot product of the Q4_0 row w with the quantized activations a, in the
// block order the package doc defines, each weight quant being its nibble − 8. len(w) must be
// RowBytesQ4_0(len(a.Q)).
func DotQ4_0(w []byte, a *Activation) float32 {
	n := len(a.Q)
	checkRow("Q4_0", n, len(w), RowBytesQ4_0(n))
	var acc float32
	for b := range n / BlockSize {
		blk := w[b*Q4_0BlockBytes : (b+1)*Q4_0BlockBytes]
		f := float32(F16ToF32(binary.LittleEndian.Uint16(blk)) * a.D[b])
		x := a.Q[b*BlockSize : (b+1)*BlockSize]
		var s int32
		for j, v := range x {
			s += q4Quant(blk[2:], j) * int32(v)
		}
		acc = FMA32(f, float32(s), acc)
	}
	return acc
}

// q4Quant returns element j of a Q4_0 block's nibbles qs, minus 8.
func q4Quant(qs []byte, j int) int32 {
	if j < BlockSize/2 {
		return int32(qs[j]&15) - 8
	}
	return int32(qs[j-BlockSize/2]>>4) - 8
}

// DotAffine returns the dot product of one MLX affine row (its packed codes, and the scale and
// bias of each group, widened to F32) with the quantized activations a, in the order the package
// doc defines.
func DotAffine(f Affine, packed []byte, scales, biases []float32, a *Activation) float32 {
	n := len(a.Q)
	f.checkRow(n, len(packed), len(scales), len(biases))
	var lanes [8]float32
	for b := range n / BlockSize {
		g := b * BlockSize / f.GroupSize
		fs := float32(scales[g] * a.D[b])
		fb := float32(biases[g] * a.D[b])
		x := a.Q[b*BlockSize : (b+1)*BlockSize]
		t := a.Lanes(b)
		for k := range lanes {
			var s int32
			for j := 4 * k; j < 4*k+4; j++ {
				s += int32(Code(packed, b*BlockSize+j, f.Bits)) * int32(x[j])
			}
			lanes[k] = FMA32(fs, float32(s), lanes[k])
			lanes[k] = FMA32(fb, float32(t[k]), lanes[k])
		}
	}
	return sumLanes(&lanes)
}
