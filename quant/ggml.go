package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The GGUF block formats, byte for byte as ggml lays them out (ggml-common.h):
//
//	block_q8_0: d F16 (2 bytes, little-endian), qs [32]int8.         Element j = d·qs[j].
//	block_q4_0: d F16 (2 bytes, little-endian), qs [16]uint8: byte j holds element j in its low
//	            nibble and element j+16 in its high nibble.         Element = d·(nibble − 8).
//
// A row of n elements (n a multiple of BlockSize) is n/32 blocks back to back.
const (
	Q8_0BlockBytes = 2 + BlockSize   // 34
	Q4_0BlockBytes = 2 + BlockSize/2 // 18
)

// RowBytesQ8_0 and RowBytesQ4_0 return the bytes of a row of n elements, n a multiple of
// BlockSize.
func RowBytesQ8_0(n int) int { return n / BlockSize * Q8_0BlockBytes }
func RowBytesQ4_0(n int) int { return n / BlockSize * Q4_0BlockBytes }

// checkRow panics unless n is a positive multiple of BlockSize and dst holds the row.
func checkRow(format string, n, have, want int) {
	if n%BlockSize != 0 || have != want {
		panic(fmt.Sprintf("quant: %s row of %d elements in %d bytes: want a multiple of %d elements and %d bytes", format, n, have, BlockSize, want))
	}
}

// QuantizeQ8_0 writes src as Q8_0 blocks into dst, as ggml's quantize_row_q8_0_ref does (the
// quantizer llama-quantize and GGUF converters run): per block, d = amax/127 with amax the
// largest |x|, each quant the x·(1/d) rounded half away from zero, d stored as F16 (rounded to
// nearest even). len(src) must be a multiple of BlockSize and len(dst) RowBytesQ8_0(len(src)).
func QuantizeQ8_0(dst []byte, src []float32) {
	checkRow("Q8_0", len(src), len(dst), RowBytesQ8_0(len(src)))
	for b := range len(src) / BlockSize {
		x := src[b*BlockSize : (b+1)*BlockSize]
		out := dst[b*Q8_0BlockBytes : (b+1)*Q8_0BlockBytes]
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(out, F32ToF16(d))
		for j, v := range x {
			out[2+j] = byte(int8(roundAway(v * id)))
		}
	}
}

// QuantizeQ4_0 writes src as Q4_0 blocks into dst, as ggml's quantize_row_q4_0_ref does: per
// block, m is the element of largest magnitude (the first, on a tie) with its sign, d = m/−8,
// and each element's nibble min(15, trunc(x·(1/d) + 8.5)), d stored as F16. len(src) must be a
// multiple of BlockSize and len(dst) RowBytesQ4_0(len(src)).
func QuantizeQ4_0(dst []byte, src []float32) {
	checkRow("Q4_0", len(src), len(dst), RowBytesQ4_0(len(src)))
	for b := range len(src) / BlockSize {
		x := src[b*BlockSize : (b+1)*BlockSize]
		out := dst[b*Q4_0BlockBytes : (b+1)*Q4_0BlockBytes]
		var amax, m float32
		for _, v := range x {
			if amax < abs32(v) {
				amax, m = abs32(v), v
			}
		}
		d := m / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(out, F32ToF16(d))
		for j := range BlockSize / 2 {
			// The products are rounded before 8.5 is added, as ggml's C computes them: Go
			// would fuse them into one multiply-add on arm64.
			lo := min(15, nibbleOf(float32(x[j]*id)+8.5))
			hi := min(15, nibbleOf(float32(x[j+BlockSize/2]*id)+8.5))
			out[2+j] = lo | hi<<4
		}
	}
}

// nibbleOf converts v, in [0, 16.5] for finite weights, to an integer toward zero as C's
// (int8_t) cast does; a value outside int8's range (a NaN or infinite weight) gives 0.
func nibbleOf(v float32) byte {
	if !(v >= 0 && v < 128) {
		return 0
	}
	return byte(v)
}

// DequantizeQ8_0 writes the values of the Q8_0 row src into dst: d·q, one rounding, as ggml's
// dequantize_row_q8_0. len(dst) must be a multiple of BlockSize and len(src) RowBytesQ8_0(len(dst)).
func DequantizeQ8_0(dst []float32, src []byte) {
	checkRow("Q8_0", len(dst), len(src), RowBytesQ8_0(len(dst)))
	for b := range len(dst) / BlockSize {
		blk := src[b*Q8_0BlockBytes:]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		for j := range BlockSize {
			dst[b*BlockSize+j] = float32(int8(blk[2+j])) * d
		}
	}
}

// DequantizeQ4_0 writes the values of the Q4_0 row src into dst: (nibble − 8)·d, one rounding, as
// ggml's dequantize_row_q4_0.
func DequantizeQ4_0(dst []float32, src []byte) {
	checkRow("Q4_0", len(dst), len(src), RowBytesQ4_0(len(dst)))
	for b := range len(dst) / BlockSize {
		blk := src[b*Q4_0BlockBytes:]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		for j := range BlockSize / 2 {
			q := blk[2+j]
			dst[b*BlockSize+j] = float32(int(q&15)-8) * d
			dst[b*BlockSize+j+BlockSize/2] = float32(int(q>>4)-8) * d
		}
	}
}

// WidenF16 and WidenBF16 (and WidenF32 below) write the F32 values of the little-endian F16 or BF16 elements of src
// into dst, exactly; len(src) must be 2·len(dst). They turn 16-bit checkpoint rows into the F32
// rows the quantizers take.
func WidenF16(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	for j := range dst {
		dst[j] = F16ToF32(binary.LittleEndian.Uint16(src[2*j:]))
	}
}

func WidenBF16(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	for j := range dst {
		dst[j] = BF16ToF32(binary.LittleEndian.Uint16(src[2*j:]))
	}
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// roundAway rounds v to an integer, halves away from zero (C's roundf), and clamps it to int8's
// range; a NaN gives 0.
func roundAway(v float32) int8 {
	r := math.Round(float64(v))
	switch {
	case r >= 127:
		return 127
	case r <= -128:
		return -128
	case r != r:
		return 0
	}
	return int8(r)
}

// WidenF32 writes the little-endian F32 elements of src into dst; len(src) must be 4·len(dst).
func WidenF32(dst []float32, src []byte) {
	src = src[:4*len(dst)]
	for j := range dst {
		dst[j] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*j:]))
	}
}
