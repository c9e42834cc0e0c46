package gguf

import "fmt"

// Type is a tensor's ggml type: its element encoding, plain (F32, F16, BF16) or quantized in
// blocks (Q8_0, Q4_K …). The values are ggml's (ggml.h, enum ggml_type), as files store them.
type Type uint32

// The ggml types. Numbers that ggml retired (4, 5, 31–33, 36–38) are not types: a file that
// uses them is refused.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
	NVFP4   Type = 40
	Q1_0    Type = 41
	Q2_0    Type = 42
)

// typeInfo is how one type lays out its elements: blocks of blockSize elements, each typeSize
// bytes (1 and the element's size for the plain types).
type typeInfo struct {
	name                string
	blockSize, typeSize int
}

// qk is the block size of the K-quants and of the i-quants.
const qk = 256

// types holds every type ggml defines, with the block layouts of gguf-py's GGML_QUANT_SIZES.
var types = map[Type]typeInfo{
	F32:     {"F32", 1, 4},
	F16:     {"F16", 1, 2},
	Q4_0:    {"Q4_0", 32, 2 + 16},
	Q4_1:    {"Q4_1", 32, 2 + 2 + 16},
	Q5_0:    {"Q5_0", 32, 2 + 4 + 16},
	Q5_1:    {"Q5_1", 32, 2 + 2 + 4 + 16},
	Q8_0:    {"Q8_0", 32, 2 + 32},
	Q8_1:    {"Q8_1", 32, 4 + 4 + 32},
	Q2_K:    {"Q2_K", qk, 2 + 2 + qk/16 + qk/4},
	Q3_K:    {"Q3_K", qk, 2 + qk/4 + qk/8 + 12},
	Q4_K:    {"Q4_K", qk, 2 + 2 + qk/2 + 12},
	Q5_K:    {"Q5_K", qk, 2 + 2 + qk/2 + qk/8 + 12},
	Q6_K:    {"Q6_K", qk, 2 + qk/2 + qk/4 + qk/16},
	Q8_K:    {"Q8_K", qk, 4 + qk + qk/8},
	IQ2_XXS: {"IQ2_XXS", qk, 2 + qk/4},
	IQ2_XS:  {"IQ2_XS", qk, 2 + qk/4 + qk/32},
	IQ3_XXS: {"IQ3_XXS", qk, 2 + qk/4 + qk/8},
	IQ1_S:   {"IQ1_S", qk, 2 + qk/8 + qk/16},
	IQ4_NL:  {"IQ4_NL", 32, 2 + 16},
	IQ3_S:   {"IQ3_S", qk, 2 + qk/4 + qk/8 + qk/32 + 4},
	IQ2_S:   {"IQ2_S", qk, 2 + qk/4 + qk/16},
	IQ4_XS:  {"IQ4_XS", qk, 2 + 2 + qk/2 + qk/64},
	I8:      {"I8", 1, 1},
	I16:     {"I16", 1, 2},
	I32:     {"I32", 1, 4},
	I64:     {"I64", 1, 8},
	F64:     {"F64", 1, 8},
	IQ1_M:   {"IQ1_M", qk, qk/8 + qk/16 + qk/32},
	BF16:    {"BF16", 1, 2},
	TQ1_0:   {"TQ1_0", qk, 2 + 4*13},
	TQ2_0:   {"TQ2_0", qk, 2 + 64},
	MXFP4:   {"MXFP4", 32, 1 + 16},
	NVFP4:   {"NVFP4", 64, 4 + 32},
	Q1_0:    {"Q1_0", 128, 2 + 16},
	Q2_0:    {"Q2_0", 64, 2 + 16},
}

// Known reports whether t is a type ggml defines.
func (t Type) Known() bool {
	_, ok := types[t]
	return ok
}

// String returns ggml's name of the type ("Q4_K"), or "type N" for a number that names none.
func (t Type) String() string {
	if info, ok := types[t]; ok {
		return info.name
	}
	return fmt.Sprintf("type %d", uint32(t))
}

// BlockSize returns the elements in one block of the type (1 for the plain types), 0 for an
// unknown type.
func (t Type) BlockSize() int { return types[t].blockSize }

// BlockBytes returns the bytes of one block of the type, 0 for an unknown type.
func (t Type) BlockBytes() int { return types[t].typeSize }

// RowBytes returns the bytes of n elements of the type, which must be a whole number of blocks.
func (t Type) RowBytes(n int64) int64 {
	info := types[t]
	if info.blockSize == 0 {
		return 0
	}
	return n / int64(info.blockSize) * int64(info.typeSize)
}
