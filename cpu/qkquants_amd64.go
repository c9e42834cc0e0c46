package cpu

// The assembly kernels of Q4_K and Q6_K weights (qkquants_amd64.s): one row of nsb·8 activation
// blocks at act against the four weight rows of a group at w, nsb super-blocks; res[c] gets the
// dot product with column c. nsb is positive and the caller has checked the bounds. They need
// AVX2, FMA and F16C.

//go:noescape
func q4kx1AVX2(res *[8]float32, w *byte, act *actBlock, nsb int)

//go:noescape
func q6kx1AVX2(res *[8]float32, w *byte, act *actBlock, nsb int)
