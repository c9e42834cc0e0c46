package cpu

import "math"

// The exponential of softmax and SiLU. Both kinds of kernel use Cephes' expf: within 1 ulp of exp
// on [expLo, expOver), 0 below (no subnormal results), +Inf from about expOver up (a little before
// the true value passes the largest float32, at 88.72), NaN for NaN. The assembly computes
// eight lanes at once with fused multiply-adds; expGo is the same steps unfused. Elements past the
// last multiple of 8 go through the assembly too, in a padded block, so an element's bits never
// depend on where it sits in the slice.

const (
	expLo   = -87.33654475055310898657 // ln 2⁻¹²⁶: below it the result would be subnormal
	expOver = 88.3762626647949         // (127.5 ln 2) where n reaches 128 and 2ⁿ is +Inf
	expHi   = 88.5                     // inputs are clamped to it, past expOver: +Inf follows
)

// expGo is the pure-Go exponential (see the constants in kernels_amd64.s).
func expGo(x float32) float32 {
	switch {
	case x != x:
		return x
	case x < expLo:
		return 0
	case x > expHi:
		x = expHi
	}
	n := float32(math.Floor(float64(float32(x*1.44269504088896341) + 0.5)))
	x -= float32(n * 0.693359375)
	x -= float32(n * -2.12194440e-4)
	y := float32(1.9875691500e-4)
	y = float32(y*x) + 1.3981999507e-3
	y = float32(y*x) + 8.3334519073e-3
	y = float32(y*x) + 4.1665795894e-2
	y = float32(y*x) + 1.6666665459e-1
	y = float32(y*x) + 5.0000001201e-1
	y = float32(y*float32(x*x)) + x + 1
	return y * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// softmaxExp replaces e[j] with exp(e[j]−m) and returns their sum in the fixed order: element j
// into lane j%8, the lanes combined as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)).
func softmaxExp(e []float32, m float32) float32 {
	var lanes [8]float32
	if useAsm {
		n8 := len(e) &^ 7
		if n8 > 0 {
			expSumAsm(&e[0], n8, m, &lanes)
		}
		if tail := e[n8:]; len(tail) > 0 {
			// Pad with −Inf, whose exponential adds +0 to its lane: the lanes are as if the
			// block were never padded.
			pad := [8]float32{}
			for k := range pad {
				pad[k] = float32(math.Inf(-1))
			}
			copy(pad[:], tail)
			expSumAsm(&pad[0], 8, m, &lanes)
			copy(tail, pad[:])
		}
	} else {
		for j, x := range e {
			v := expGo(x - m)
			e[j] = v
			lanes[j%8] += v
		}
	}
	return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
}

// siluMul writes dst[i] = g[i]/(1+exp(−g[i]))·u[i], in F32; g and u are at least as long as dst.
func siluMul(dst, g, u []float32) {
	g, u = g[:len(dst)], u[:len(dst)]
	if !useAsm {
		for i, gi := range g {
			dst[i] = gi / (1 + expGo(-gi)) * u[i]
		}
		return
	}
	n8 := len(dst) &^ 7
	if n8 > 0 {
		siluMulAsm(&dst[0], &g[0], &u[0], n8)
	}
	if len(dst) > n8 {
		var pd, pg, pu [8]float32
		copy(pg[:], g[n8:])
		copy(pu[:], u[n8:])
		siluMulAsm(&pd[0], &pg[0], &pu[0], 8)
		copy(dst[n8:], pd[:])
	}
}

// GELU's tanh approximation as PyTorch writes it: kBeta = √2·(2/√π)·0.5 = √(2/π), kKappa = 0.044715.
const (
	geluBeta  = float32(0.7978845608028654)
	geluKappa = float32(0.044715)
)

// geluTanhMul writes dst[i] = 0.5·g·(1 + tanh(β·(g + κ·g³)))·u[i] with g = g[i], in F32, each step
// rounded as written; tanh(y) = sign(y)·(1 − e)/(1 + e) with e = exp(−2|y|) from expGo, the steps
// the GPU kernel gelu_tanh_mul takes, so that every backend rounds alike.
func geluTanhMul(dst, g, u []float32) {
	g, u = g[:len(dst)], u[:len(dst)]
	for i, x := range g {
		dst[i] = geluTanh(x) * u[i]
	}
}

func geluTanh(x float32) float32 {
	// The float32 conversions keep Go from fusing a multiply and an add (the spec allows it).
	cube := float32(x*x) * x
	y := geluBeta * float32(x+float32(geluKappa*cube))
	a := y
	if a < 0 {
		a = -a
	}
	e := expGo(float32(-2 * a))
	t := (1 - e) / (1 + e)
	if y < 0 {
		t = -t
	}
	return float32(0.5*x) * float32(1+t)
}

// clampedSwiGLU writes dst[i] = (clamp(u[i], −limit, limit) + 1)·(g·σ(alpha·g)) with
// g = min(g[i], limit), as transformers' GptOssExperts computes it in float32: the gate clamped
// above, the up clamped both ways, glu = g·sigmoid(g·alpha), then (up + 1)·glu.
func clampedSwiGLU(dst, g, u []float32, alpha, limit float32) {
	g, u = g[:len(dst)], u[:len(dst)]
	for i, x := range g {
		x = min(x, limit)
		up := max(min(u[i], limit), -limit)
		s := 1 / (1 + expGo(-float32(x*alpha)))
		dst[i] = float32(up+1) * float32(x*s)
	}
}
