package engine

import (
	"testing"

	"tfd/compute"
)

// TestTransposeColumns: GPT-OSS's [E, in, out] experts with gate and up interleaved by column
// become [E, out, in] matrices, gate (even columns) and up (odd) apart, each element moved whole,
// across more than one tile of the transpose.
func TestTransposeColumns(t *testing.T) {
	const e, k, n = 2, 70, 2 * 67
	data := make([]byte, e*k*n*2)
	at := func(x, i, c int) uint16 { return uint16(x*10007 + i*131 + c) } // distinct for every element
	for x := range e {
		for i := range k {
			for c := range n {
				v := at(x, i, c)
				data[2*((x*k+i)*n+c)], data[2*((x*k+i)*n+c)+1] = byte(v), byte(v>>8)
			}
		}
	}
	src := stored{name: "gate_up_proj", dtype: compute.BF16, shape: []int{e, k, n}, data: data}
	for first := range 2 {
		got := transposeColumns(src, first, 2)
		if got.shape[0] != e || got.shape[1] != n/2 || got.shape[2] != k {
			t.Fatalf("shape %v", got.shape)
		}
		for x := range e {
			for o := range n / 2 {
				for i := range k {
					j := 2 * ((x*(n/2)+o)*k + i)
					if v := uint16(got.data[j]) | uint16(got.data[j+1])<<8; v != at(x, i, first+2*o) {
						t.Fatalf("columns %d::2: [%d][%d][%d] = %d, want %d", first, x, o, i, v, at(x, i, first+2*o))
					}
				}
			}
		}
	}
}
