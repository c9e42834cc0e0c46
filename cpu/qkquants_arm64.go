package cpu

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
