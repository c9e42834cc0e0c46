package cpu

import "tfd/compute"

// The NEON kernels of Q4_K and Q6_K weights (qkquants_arm64.s), with the contract of the AVX2
// ones (qkquants_amd64.go): one row of nsb·8 activation blocks at act against the four weight rows
// of a group at w, nsb super-blocks; res[c] gets the dot product with column c. nsb is positive
// and the caller has checked the bounds. The SDOT kernels need hasSDOT.

//go:noescape
func q4kx1NEON(res *[8]float32, w *byte, act *actBlock, nsb int)

//go:noescape
func q6kx1NEON(res *[8]float32, w *byte, act *actBlock, nsb int)

//go:noescape
func q4kx1SDOT(res *[8]float32, w *byte, act *actBlock, nsb int)

//go:noescape
func q6kx1SDOT(res *[8]float32, w *byte, act *actBlock, nsb int)

// qdotsKNEON is qdots for Q4_K and Q6_K weights with the NEON kernels (nb > 0, bounds checked by
// the caller): one row at a time, the second reading the group's units from the L1 cache.
func qdotsKNEON(res *[8]float32, dtype compute.DType, w []byte, act []actBlock, nb, nr int) {
	kernel := q4kx1NEON
	switch {
	case dtype == compute.Q4_K && useSDOT:
		kernel = q4kx1SDOT
	case dtype == compute.Q6_K && useSDOT:
		kernel = q6kx1SDOT
	case dtype == compute.Q6_K:
		kernel = q6kx1NEON
	}
	for r := range nr {
		var row [8]float32
		kernel(&row, &w[0], &act[r*nb], nb/8)
		copy(res[4*r:4*r+4], row[:4])
	}
}
