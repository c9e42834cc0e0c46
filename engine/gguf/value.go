package gguf

import (
	"fmt"
	"math"
)

// ValueType is the type of a metadata value, as files store it (gguf.h, enum gguf_type).
type ValueType uint32

// The metadata value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"}

// String returns gguf's short name of the type ("u32", "str", "arr").
func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("value type %d", uint32(t))
}

// size returns the bytes one value of a fixed-size type takes, 0 for strings, arrays and unknown
// types.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// Value is one metadata value: a scalar, a string, or an array of either (arrays of arrays are
// allowed by the format and read, though no model uses them). The zero Value is no value.
//
// It holds the value as a Go value of the matching type: uint8 … float64, bool, string, and for
// arrays a slice of those ([]string, []int32 …) or []Value for an array of arrays.
type Value struct {
	typ  ValueType // TypeArray for arrays
	elem ValueType // an array's element type
	v    any
}

// Type returns the value's type; TypeArray for an array.
func (v Value) Type() ValueType { return v.typ }

// ElemType returns an array's element type.
func (v Value) ElemType() ValueType { return v.elem }

// Any returns the value as its Go value (see Value).
func (v Value) Any() any { return v.v }

// Str returns a string value.
func (v Value) Str() (string, bool) {
	s, ok := v.v.(string)
	return s, ok
}

// Bool returns a bool value.
func (v Value) Bool() (bool, bool) {
	b, ok := v.v.(bool)
	return b, ok
}

// Int returns a value of any integer type as an int64; a uint64 above the int64 range is not
// given.
func (v Value) Int() (int64, bool) {
	switch x := v.v.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint64:
		return int64(x), x <= math.MaxInt64
	case int64:
		return x, true
	}
	return 0, false
}

// Float returns a float32 or float64 value as a float64.
func (v Value) Float() (float64, bool) {
	switch x := v.v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// Strings returns an array of strings. The slice is the Value's: do not change it.
func (v Value) Strings() ([]string, bool) {
	s, ok := v.v.([]string)
	return s, ok
}

// Ints returns an array of any integer type, converted to int64 (a new slice); a uint64 element
// above the int64 range fails it.
func (v Value) Ints() ([]int64, bool) {
	switch x := v.v.(type) {
	case []uint8:
		return widen(x), true
	case []int8:
		return widen(x), true
	case []uint16:
		return widen(x), true
	case []int16:
		return widen(x), true
	case []uint32:
		return widen(x), true
	case []int32:
		return widen(x), true
	case []int64:
		return append([]int64(nil), x...), true
	case []uint64:
		out := make([]int64, len(x))
		for i, e := range x {
			if e > math.MaxInt64 {
				return nil, false
			}
			out[i] = int64(e)
		}
		return out, true
	}
	return nil, false
}

func widen[T uint8 | int8 | uint16 | int16 | uint32 | int32](s []T) []int64 {
	out := make([]int64, len(s))
	for i, e := range s {
		out[i] = int64(e)
	}
	return out
}

// Len returns an array's length, 0 for a scalar.
func (v Value) Len() int {
	switch x := v.v.(type) {
	case []uint8:
		return len(x)
	case []int8:
		return len(x)
	case []uint16:
		return len(x)
	case []int16:
		return len(x)
	case []uint32:
		return len(x)
	case []int32:
		return len(x)
	case []float32:
		return len(x)
	case []bool:
		return len(x)
	case []string:
		return len(x)
	case []uint64:
		return len(x)
	case []int64:
		return len(x)
	case []float64:
		return len(x)
	case []Value:
		return len(x)
	}
	return 0
}

// Describe returns the value's type as a person reads it: "u32", "arr[str] of 151936".
func (v Value) Describe() string {
	if v.typ == TypeArray {
		return fmt.Sprintf("arr[%s] of %d", v.elem, v.Len())
	}
	return v.typ.String()
}

// Constructors of values, for the Writer.

// Uint8 … Float64, Bool and String make scalar values.
func Uint8(x uint8) Value     { return Value{typ: TypeUint8, v: x} }
func Int8(x int8) Value       { return Value{typ: TypeInt8, v: x} }
func Uint16(x uint16) Value   { return Value{typ: TypeUint16, v: x} }
func Int16(x int16) Value     { return Value{typ: TypeInt16, v: x} }
func Uint32(x uint32) Value   { return Value{typ: TypeUint32, v: x} }
func Int32(x int32) Value     { return Value{typ: TypeInt32, v: x} }
func Float32(x float32) Value { return Value{typ: TypeFloat32, v: x} }
func Bool(x bool) Value       { return Value{typ: TypeBool, v: x} }
func String(x string) Value   { return Value{typ: TypeString, v: x} }
func Uint64(x uint64) Value   { return Value{typ: TypeUint64, v: x} }
func Int64(x int64) Value     { return Value{typ: TypeInt64, v: x} }
func Float64(x float64) Value { return Value{typ: TypeFloat64, v: x} }

// Strings, Int32s, Uint32s, Float32s and Bools make arrays; the Value keeps the slice.
func Strings(x []string) Value   { return Value{typ: TypeArray, elem: TypeString, v: x} }
func Bools(x []bool) Value       { return Value{typ: TypeArray, elem: TypeBool, v: x} }
func Int32s(x []int32) Value     { return Value{typ: TypeArray, elem: TypeInt32, v: x} }
func Uint32s(x []uint32) Value   { return Value{typ: TypeArray, elem: TypeUint32, v: x} }
func Float32s(x []float32) Value { return Value{typ: TypeArray, elem: TypeFloat32, v: x} }
