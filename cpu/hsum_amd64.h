// The lane reduction every kernel shares, so that a dot product has the same bits whichever
// kernel computed it:
//   hadd(a, b)      = [a0+a1, a2+a3, b0+b1, b2+b3 | a4+a5, a6+a7, b4+b5, b6+b7]
//   hadd(ab, cd)    = [(a0+a1)+(a2+a3), …, (d0+d1)+(d2+d3) | (a4+a5)+(a6+a7), …]
//   low + high      = [a, b, c, d], a = ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)).

// HSUM4 reduces the accumulators a, b, c, d (clobbering all four) into the low four floats of xa,
// the X register of a; xc is the X register of c.
#define HSUM4(a, b, c, d, xa, xc) \
	VHADDPS b, a, a; \
	VHADDPS d, c, c; \
	VHADDPS c, a, a; \
	VEXTRACTF128 $1, a, xc; \
	VADDPS xc, xa, xa

