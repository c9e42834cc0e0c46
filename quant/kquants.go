package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The K-quants tfd runs, byte for byte as ggml lays them out (ggml-common.h): rows are
// super-blocks of SuperBlockSize elements, each made of eight sub-blocks of 32 (Q4_K) or sixteen
// of 16 (Q6_K) with scales of their own, themselves quantized against the super-block's F16 scale.
//
//	block_q4_K (144 bytes): d F16, dmin F16, scales [12]byte, qs [128]byte.
//	  scales packs sub-block j's 6-bit scale sc[j] and 6-bit min m[j]: for j < 4, sc[j] is the
//	  low 6 bits of byte j and m[j] of byte j+4; for j ≥ 4, sc[j] is the low nibble of byte j+4
//	  with the top 2 bits of byte j−4 above it, m[j] the high nibble of byte j+4 with the top 2
//	  bits of byte j above it. qs is four runs of 32 bytes; run r holds sub-block 2r in its low
//	  nibbles and sub-block 2r+1 in its high ones, element l in byte l.
//	  Element l of sub-block j is (d·sc[j])·q − dmin·m[j], q its nibble.
//	block_q6_K (210 bytes): ql [128]byte, qh [64]byte, scales [16]int8, d F16.
//	  Each half h of 128 elements has ql[64h … 64h+63] and qh[32h … 32h+31]: element i of the
//	  half has its low 4 bits in ql[64h + i%64] (the low nibble for i < 64, the high one after)
//	  and its top 2 bits in bits 2·(i/32) … of qh[32h + i%32]. Element e of the super-block is
//	  (d·scales[e/16])·(q − 32), q its 6 bits.
//
// d·sc, dmin·m and d·scales are exact in F32 (an F16 significand times a 6- or 8-bit integer).
const (
	SuperBlockSize = 256
	Q4_KBlockBytes = 2 + 2 + 12 + SuperBlockSize/2                               // 144
	Q6_KBlockBytes = SuperBlockSize/2 + SuperBlockSize/4 + SuperBlockSize/16 + 2 // 210
)

// RowBytesQ4_K and RowBytesQ6_K return the bytes of a row of n elements, n a multiple of
// SuperBlockSize.
func RowBytesQ4_K(n int) int { return n / SuperBlockSize * Q4_KBlockBytes }
func RowBytesQ6_K(n int) int { return n / SuperBlockSize * Q6_KBlockBytes }

// checkSuperRow panics unless n is a positive multiple of SuperBlockSize and the row has want bytes.
func checkSuperRow(format string, n, have, want int) {
	if n%SuperBlockSize != 0 || have != want {
		panic(fmt.Sprintf("quant: %s row of %d elements in %d bytes: want a multiple of %d elements and %d bytes", format, n, have, SuperBlockSize, want))
	}
}

// Q4_KScaleMin returns sub-block j's 6-bit scale and min from a Q4_K block's 12 scale bytes
// (ggml's get_scale_min_k4).
func Q4_KScaleMin(scales []byte, j int) (sc, m uint8) {
	if j < 4 {
		return scales[j] & 63, scales[j+4] & 63
	}
	return scales[j+4]&15 | scales[j-4]>>6<<4, scales[j+4]>>4 | scales[j]>>6<<4
}

// q4KQuant returns the 4-bit quant of element i (< 256) of a Q4_K block's qs.
func q4KQuant(qs []byte, i int) int32 {
	return int32(qs[i/64*32+i%32]>>(4*(i/32%2))) & 15
}

// q6KQuant returns the 6-bit quant of element i (< 256) of a Q6_K block, minus 32.
func q6KQuant(blk []byte, i int) int32 {
	h, e := i/128, i%128
	lo := blk[64*h+e%64] >> (4 * (e / 64)) & 15
	hi := blk[128+32*h+e%32] >> (2 * (e / 32)) & 3
	return int32(lo|hi<<4) - 32
}

// DequantizeQ4_K writes the values of the Q4_K row src into dst, as gguf-py's Q4_K.dequantize and
// ggml's dequantize_row_q4_K compute them: (d·sc)·q rounded, minus dmin·m, rounded.
func DequantizeQ4_K(dst []float32, src []byte) {
	checkSuperRow("Q4_K", len(dst), len(src), RowBytesQ4_K(len(dst)))
	for s := range len(dst) / SuperBlockSize {
		blk := src[s*Q4_KBlockBytes : (s+1)*Q4_KBlockBytes]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		dmin := F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
		out := dst[s*SuperBlockSize : (s+1)*SuperBlockSize]
		for i := range out {
			sc, m := Q4_KScaleMin(blk[4:16], i/BlockSize)
			out[i] = float32(float32(d*float32(sc))*float32(q4KQuant(blk[16:], i))) - float32(dmin*float32(m))
		}
	}
}

// DequantizeQ6_K writes the values of the Q6_K row src into dst, as gguf-py's Q6_K.dequantize and
// ggml's dequantize_row_q6_K compute them: (d·scale)·(q − 32), one rounding.
func DequantizeQ6_K(dst []float32, src []byte) {
	checkSuperRow("Q6_K", len(dst), len(src), RowBytesQ6_K(len(dst)))
	for s := range len(dst) / SuperBlockSize {
		blk := src[s*Q6_KBlockBytes : (s+1)*Q6_KBlockBytes]
		d := F16ToF32(binary.LittleEndian.Uint16(blk[208:]))
		out := dst[s*SuperBlockSize : (s+1)*SuperBlockSize]
		for i := range out {
			out[i] = d * float32(int8(blk[192+i/16])) * float32(q6KQuant(blk, i))
		}
	}
}

// DotQ4_K returns the dot product of the Q4_K row w with the quantized activations a. Activation
// block b is sub-block b%8 of super-block b/8; with that super-block's d and dmin, the
// sub-block's sc and m, and the block's d_x, fd = float32(d·d_x) and fm = float32(dmin·d_x), each
// lane k of the package doc's order takes
//
//	lane[k] = fma(fd, float32(sc·s[k]), lane[k]), then lane[k] = fma(fm, float32(−m·t[k]), lane[k])
//
// where s[k] is the lane's integer sum of q·x and t[k] its sum of activation quants. The
// products sc·s[k] and m·t[k] are integers below 2²⁴, so exact. len(w) must be
// RowBytesQ4_K(len(a.Q)).
func DotQ4_K(w []byte, a *Activation) float32 {
	n := len(a.Q)
	checkSuperRow("Q4_K", n, len(w), RowBytesQ4_K(n))
	var lanes [8]float32
	for b := range n / BlockSize {
		blk := w[b/8*Q4_KBlockBytes : (b/8+1)*Q4_KBlockBytes]
		j := b % 8
		fd := float32(F16ToF32(binary.LittleEndian.Uint16(blk)) * a.D[b])
		fm := float32(F16ToF32(binary.LittleEndian.Uint16(blk[2:])) * a.D[b])
		sc, m := Q4_KScaleMin(blk[4:16], j)
		x := a.Q[b*BlockSize : (b+1)*BlockSize]
		t := a.Lanes(b)
		for k := range lanes {
			var s int32
			for l := 4 * k; l < 4*k+4; l++ {
				s += q4KQuant(blk[16:], j*BlockSize+l) * int32(x[l])
			}
			lanes[k] = FMA32(fd, float32(int32(sc)*s), lanes[k])
			lanes[k] = FMA32(fm, float32(-int32(m)*t[k]), lanes[k])
		}
	}
	return sumLanes(&lanes)
}

// DotQ6_K returns the dot product of the Q6_K row w with the quantized activations a. Activation
// block b covers elements 32·(b%8) … of super-block b/8, whose scales are scales[2·(b%8)] for
// lanes 0–3 and scales[2·(b%8)+1] for lanes 4–7; with fd = float32(d·d_x), each lane k takes
//
//	lane[k] = fma(fd, float32(scale·s[k]), lane[k])
//
// where s[k] is the lane's integer sum of (q−32)·x; scale·s[k] is an integer below 2²⁴, so exact.
// len(w) must be RowBytesQ6_K(len(a.Q)).
func DotQ6_K(w []byte, a *Activation) float32 {
	n := len(a.Q)
	checkSuperRow("Q6_K", n, len(w), RowBytesQ6_K(n))
	var lanes [8]float32
	for b := range n / BlockSize {
		blk := w[b/8*Q6_KBlockBytes : (b/8+1)*Q6_KBlockBytes]
		j := b % 8
		fd := float32(F16ToF32(binary.LittleEndian.Uint16(blk[208:])) * a.D[b])
		x := a.Q[b*BlockSize : (b+1)*BlockSize]
		for k := range lanes {
			var s int32
			for l := 4 * k; l < 4*k+4; l++ {
				s += q6KQuant(blk, j*BlockSize+l) * int32(x[l])
			}
			sc := int32(int8(blk[192+2*j+k/4]))
			lanes[k] = FMA32(fd, float32(sc*s), lanes[k])
		}
	}
	return sumLanes(&lanes)
}

// QuantizeQ4_K writes src as Q4_K blocks into dst, as ggml's quantize_row_q4_K_ref does (what
// llama-quantize runs without an importance matrix): per sub-block, a scale and a min fitted by
// make_qkx2_quants with weights |x| + rms, then both quantized to 6 bits against the largest of
// the super-block, and the quants chosen again against the quantized scale and min. len(src)
// must be a multiple of SuperBlockSize and len(dst) RowBytesQ4_K(len(src)).
func QuantizeQ4_K(dst []byte, src []float32) {
	checkSuperRow("Q4_K", len(src), len(dst), RowBytesQ4_K(len(src)))
	var (
		codes        [SuperBlockSize]uint8
		aux          [32]uint8
		weights      [32]float32
		scales, mins [8]float32
	)
	for s := range len(src) / SuperBlockSize {
		x := src[s*SuperBlockSize : (s+1)*SuperBlockSize]
		blk := dst[s*Q4_KBlockBytes : (s+1)*Q4_KBlockBytes]
		clear(blk)
		var maxScale, maxMin float32
		for j := range 8 {
			sub := x[32*j : 32*j+32]
			var sumX2 float32
			for _, v := range sub {
				sumX2 += float32(v * v)
			}
			av := float32(math.Sqrt(float64(sumX2 / 32)))
			for l, v := range sub {
				weights[l] = av + abs32(v)
			}
			scales[j] = makeQKX2Quants(15, sub, weights[:], codes[32*j:32*j+32], &mins[j], aux[:], -1, 0.1, 20)
			maxScale, maxMin = max(maxScale, scales[j]), max(maxMin, mins[j])
		}
		var invScale, invMin float32
		if maxScale > 0 {
			invScale = 63 / maxScale
		}
		if maxMin > 0 {
			invMin = 63 / maxMin
		}
		sb := blk[4:16]
		for j := range 8 {
			ls := min(63, uint8(nearestInt(float32(invScale*scales[j]))))
			lm := min(63, uint8(nearestInt(float32(invMin*mins[j]))))
			if j < 4 {
				sb[j], sb[j+4] = ls, lm
			} else {
				sb[j+4] = ls&15 | lm&15<<4
				sb[j-4] |= ls >> 4 << 6
				sb[j] |= lm >> 4 << 6
			}
		}
		binary.LittleEndian.PutUint16(blk, F32ToF16(maxScale/63))
		binary.LittleEndian.PutUint16(blk[2:], F32ToF16(maxMin/63))
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		dmin := F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
		for j := range 8 {
			sc, m := Q4_KScaleMin(sb, j)
			dj := d * float32(sc)
			if dj == 0 {
				continue
			}
			dm := dmin * float32(m)
			for l := range 32 {
				codes[32*j+l] = uint8(min(max(nearestInt((x[32*j+l]+dm)/dj), 0), 15))
			}
		}
		qs := blk[16:]
		for r := range 4 {
			for l := range 32 {
				qs[32*r+l] = codes[64*r+l] | codes[64*r+32+l]<<4
			}
		}
	}
}

// QuantizeQ6_K writes src as Q6_K blocks into dst, as ggml's quantize_row_q6_K_ref does: per
// sub-block of 16, a scale fitted by make_qx_quants (weights x²), the scales quantized to int8
// against the one of largest magnitude, and the quants chosen again against the quantized
// scales. len(src) must be a multiple of SuperBlockSize and len(dst) RowBytesQ6_K(len(src)).
func QuantizeQ6_K(dst []byte, src []float32) {
	checkSuperRow("Q6_K", len(src), len(dst), RowBytesQ6_K(len(src)))
	var (
		codes  [SuperBlockSize]int8
		scales [16]float32
	)
	for s := range len(src) / SuperBlockSize {
		x := src[s*SuperBlockSize : (s+1)*SuperBlockSize]
		blk := dst[s*Q6_KBlockBytes : (s+1)*Q6_KBlockBytes]
		clear(blk)
		var maxScale, maxAbs float32
		for ib := range 16 {
			scales[ib] = makeQXQuants(32, x[16*ib:16*ib+16], codes[16*ib:16*ib+16])
			if a := abs32(scales[ib]); a > maxAbs {
				maxAbs, maxScale = a, scales[ib]
			}
		}
		if maxAbs < groupMaxEps {
			continue // all zero, d included
		}
		iscale := -128 / maxScale
		binary.LittleEndian.PutUint16(blk[208:], F32ToF16(1/iscale))
		for ib := range 16 {
			blk[192+ib] = byte(int8(min(127, nearestInt(float32(iscale*scales[ib])))))
		}
		d := F16ToF32(binary.LittleEndian.Uint16(blk[208:]))
		for j := range 16 {
			dj := d * float32(int8(blk[192+j]))
			if dj == 0 {
				continue
			}
			for l := range 16 {
				codes[16*j+l] = int8(min(max(nearestInt(x[16*j+l]/dj), -32), 31) + 32)
			}
		}
		for h := range 2 {
			ql, qh, L := blk[64*h:64*h+64], blk[128+32*h:128+32*h+32], codes[128*h:128*h+128]
			for l := range 32 {
				q1, q2, q3, q4 := uint8(L[l]), uint8(L[l+32]), uint8(L[l+64]), uint8(L[l+96])
				ql[l] = q1&15 | q3&15<<4
				ql[l+32] = q2&15 | q4&15<<4
				qh[l] = q1>>4 | q2>>4<<2 | q3>>4<<4 | q4>>4<<6
			}
		}
	}
}

// groupMaxEps is ggml's GROUP_MAX_EPS: a group whose largest magnitude is below it is all zero.
const groupMaxEps = 1e-15

// The quantizers below round every product before it is added (the explicit float32
// conversions), as ggml's C computes them on x86-64: Go fuses a product and a sum into one
// multiply-add on arm64, which would change the blocks there.

// nearestInt rounds v to the nearest integer, ties to even, as ggml's nearest_int does (by adding
// 1.5·2²³), for |v| ≤ 4194303.
func nearestInt(v float32) int {
	f := float32(v) + 12582912
	return int(math.Float32bits(f)&0x7fffff) - 0x400000
}

// makeQKX2Quants is ggml's make_qkx2_quants without mean absolute deviation: it fits a scale and
// a min (returned negated in theMin) to the weighted x, trying nstep+1 grid steps, and writes the
// codes (0 … nmax) into codes.
func makeQKX2Quants(nmax int, x, weights []float32, codes []uint8, theMin *float32, aux []uint8, rmin, rdelta float32, nstep int) float32 {
	n := len(x)
	mn, mx := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		mn, mx = min(mn, x[i]), max(mx, x[i])
		sumW += weights[i]
		sumX += float32(weights[i] * x[i])
	}
	mn = min(mn, 0)
	if mx == mn {
		clear(codes[:n])
		*theMin = -mn
		return 0
	}
	iscale := float32(nmax) / (mx - mn)
	scale := 1 / iscale
	var bestError float32
	for i := range n {
		l := min(max(nearestInt(float32(iscale*(x[i]-mn))), 0), nmax)
		codes[i] = uint8(l)
		diff := float32(scale*float32(l)) + mn - x[i]
		bestError += float32(weights[i] * float32(diff*diff))
	}
	for is := 0; is <= nstep; is++ {
		iscale = (rmin + float32(rdelta*float32(is)) + float32(nmax)) / (mx - mn)
		var sumL, sumL2, sumXL float32
		for i := range n {
			l := min(max(nearestInt(float32(iscale*(x[i]-mn))), 0), nmax)
			aux[i] = uint8(l)
			w := weights[i]
			sumL += float32(w * float32(l))
			sumL2 += float32(float32(w*float32(l)) * float32(l))
			sumXL += float32(float32(w*float32(l)) * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D <= 0 {
			continue
		}
		thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
		thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
		if thisMin > 0 {
			thisMin, thisScale = 0, sumXL/sumL2
		}
		var curError float32
		for i := range n {
			diff := float32(thisScale*float32(aux[i])) + thisMin - x[i]
			curError += float32(weights[i] * float32(diff*diff))
		}
		if curError < bestError {
			copy(codes[:n], aux[:n])
			bestError, scale, mn = curError, thisScale, thisMin
		}
	}
	*theMin = -mn
	return scale
}

// makeQXQuants is ggml's make_qx_quants with rmse_type 1 (weights x²) and no importance: it fits
// a symmetric scale to x by trying 19 grid steps and writes the codes (0 … 2·nmax−1) into codes.
func makeQXQuants(nmax int, x []float32, codes []int8) float32 {
	var mx, amax float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, mx = a, v
		}
	}
	if amax < groupMaxEps {
		clear(codes)
		return 0
	}
	fnmax := float32(nmax)
	iscale := -fnmax / mx
	var sumLX, sumL2 float32
	for i, v := range x {
		l := min(max(nearestInt(float32(iscale*v)), -nmax), nmax-1)
		codes[i] = int8(l + nmax)
		w := v * v
		sumLX += float32(float32(w*v) * float32(l))
		sumL2 += float32(float32(w*float32(l)) * float32(l))
	}
	var scale float32
	if sumL2 != 0 {
		scale = sumLX / sumL2
	}
	best := scale * sumLX
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(fnmax + float32(0.1*float32(is))) / mx
		sumLX, sumL2 = 0, 0
		for _, v := range x {
			l := float32(min(max(nearestInt(float32(iscale*v)), -nmax), nmax-1))
			w := v * v
			sumLX += float32(float32(w*v) * l)
			sumL2 += float32(float32(w*l) * l)
		}
		if sumL2 > 0 && float32(sumLX*sumLX) > float32(best*sumL2) {
			for i, v := range x {
				codes[i] = int8(min(max(nearestInt(float32(iscale*v)), -nmax), nmax-1) + nmax)
			}
			scale = sumLX / sumL2
			best = scale * sumLX
		}
	}
	return scale
}
