// Shared by qkernels_arm64.s and qaffine_arm64.s: NEON instructions encoded as words, and the
// integer lane sums.

// Go's assembler has no mnemonics for most of these instructions, and the macros below take register
// numbers, so they are encoded here as words.
#define SDOT(d, n, m) WORD $(0x4e809400 | ((m)<<16) | ((n)<<5) | (d))   // sdot vd.4s, vn.16b, vm.16b
#define SMULL(d, n, m) WORD $(0x0e20c000 | ((m)<<16) | ((n)<<5) | (d))  // smull vd.8h, vn.8b, vm.8b
#define SMULL2(d, n, m) WORD $(0x4e20c000 | ((m)<<16) | ((n)<<5) | (d)) // smull2 vd.8h, vn.16b, vm.16b
#define SADDLP(d, n) WORD $(0x4e602800 | ((n)<<5) | (d))                // saddlp vd.4s, vn.8h
#define ADDP(d, n, m) WORD $(0x4ea0bc00 | ((m)<<16) | ((n)<<5) | (d))   // addp vd.4s, vn.4s, vm.4s
#define SCVTF(d, n) WORD $(0x4e21d800 | ((n)<<5) | (d))                 // scvtf vd.4s, vn.4s
#define FCVTL(d, n) WORD $(0x0e217800 | ((n)<<5) | (d))                 // fcvtl vd.4s, vn.4h
#define FADDP(d, n, m) WORD $(0x6e20d400 | ((m)<<16) | ((n)<<5) | (d))  // faddp vd.4s, vn.4s, vm.4s
#define ZERO(d) WORD $(0x4f000400 | (d))                                // movi vd.4s, #0
#define SUB4S(d, n, m) WORD $(0x6ea08400 | ((m)<<16) | ((n)<<5) | (d))  // sub vd.4s, vn.4s, vm.4s
#define FNEG(d, n) WORD $(0x6ea0f800 | ((n)<<5) | (d))                  // fneg vd.4s, vn.4s
#define SCVTF8TH(d, n) WORD $(0x4f3de400 | ((n)<<5) | (d))              // scvtf vd.4s, vn.4s, #3 (n/8)
#define SHLL16(d, n) WORD $(0x2e613800 | ((n)<<5) | (d))                // shll vd.4s, vn.4h, #16
#define SSHR3(d, n) WORD $(0x4f3d0400 | ((n)<<5) | (d))                 // sshr vd.4s, vn.4s, #3
#define UXTL8(d, n) WORD $(0x2f08a400 | ((n)<<5) | (d))                 // uxtl vd.8h, vn.8b
#define UXTL16(d, n) WORD $(0x2f10a400 | ((n)<<5) | (d))                // uxtl vd.4s, vn.4h
#define SXTL8(d, n) WORD $(0x0f08a400 | ((n)<<5) | (d))                 // sxtl vd.8h, vn.8b
#define SXTL16(d, n) WORD $(0x0f10a400 | ((n)<<5) | (d))                // sxtl vd.4s, vn.4h
#define SXTL16HI(d, n) WORD $(0x4f10a400 | ((n)<<5) | (d))              // sxtl2 vd.4s, vn.8h
// fmul, fmla and mul (integer) vd.4s, vn.4s, vm.s[i]
#define MULE(d, n, m, i) WORD $(0x4f808000 | (((i)&1)<<21) | (((i)>>1)<<11) | ((m)<<16) | ((n)<<5) | (d))
#define FMULE(d, n, m, i) WORD $(0x4f809000 | (((i)&1)<<21) | (((i)>>1)<<11) | ((m)<<16) | ((n)<<5) | (d))
#define FMLAE(d, n, m, i) WORD $(0x4f801000 | (((i)&1)<<21) | (((i)>>1)<<11) | ((m)<<16) | ((n)<<5) | (d))

// Lane sums into Vs of the 16 weight quants in Vw and activation quants in Vx (Vt a scratch).
#define SUMSDOT(s, t, w, x) ZERO(s); SDOT(s, w, x)
#define SUMSNEON(s, t, w, x) SMULL(s, w, x); SMULL2(t, w, x); SADDLP(s, s); SADDLP(t, t); ADDP(s, s, t)

#define ZERO8(a) ZERO(a); ZERO(a+1); ZERO(a+2); ZERO(a+3); ZERO(a+4); ZERO(a+5); ZERO(a+6); ZERO(a+7)

// SUMLANES writes the four columns' results of the row whose lanes start at Va to (R0), advancing.
#define SUMLANES(a) \
	FADDP(12, a, a+1); \
	FADDP(13, a+2, a+3); \
	FADDP(14, a+4, a+5); \
	FADDP(15, a+6, a+7); \
	FADDP(12, 12, 13); \
	FADDP(14, 14, 15); \
	FADDP(12, 12, 14); \
	VST1.P [V12.S4], 16(R0)
