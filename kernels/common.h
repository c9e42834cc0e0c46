// Shared by both backends, after their prelude: written only in the dialect.

// Weight storage types, by the dtype suffix of a kernel variant.
typedef ushort wt_bf16;
typedef ushort wt_f16;
typedef float wt_f32;

FUNC float bf16_lo(uint u) { return AS_FLOAT(u << 16); }
FUNC float bf16_hi(uint u) { return AS_FLOAT(u & 0xffff0000u); }
FUNC float f16_lo(uint u) { return f16_to_f32((ushort)(u & 0xffffu)); }
FUNC float f16_hi(uint u) { return f16_to_f32((ushort)(u >> 16)); }

// LOAD1_W(p, i) is element i of a weight of dtype W, widened exactly to F32.
#define LOAD1_bf16(p, i) AS_FLOAT((uint)(p)[i] << 16)
#define LOAD1_f16(p, i) f16_to_f32((p)[i])
#define LOAD1_f32(p, i) ((p)[i])

// Keys and values of a KV pool of dtype KV (compute.KVSpec.DType): wt_KV elements. STORE_KV(x)
// is the F32 value x as the pool stores it, LOAD4_KV(p) the four elements at p widened exactly
// (p 16-byte aligned for F32, 8-byte for F16), LOAD1_KV as for weights.
#define STORE_f32(x) (x)
#define STORE_f16(x) f32_to_f16(x)
#define LOAD4_f32(p) VLOAD(float4, p)
#define LOAD4_f16(p) f16x4_to_f32(p)
// RINGED_KV says whether a pool's keys and values may be copied into shared memory as they are,
// 16 bytes at a time (attention_warp's ring, attention_tile_H's stages), where a thread takes four
// elements: F32's four are 16 bytes, F16's eight (an F16 pool goes through LOAD4 instead).
#define RINGED_KV_f32 1
#define RINGED_KV_f16 0

// f32_to_f16 rounds f to the nearest F16, ties to even, as package quant's F32ToF16 does: past
// the largest finite half to an infinity, below half the smallest subnormal to zero, a NaN to the
// quiet NaN 0x7e00 with f's sign. In integer arithmetic, so every backend stores the same bits.
FUNC ushort f32_to_f16(float f) {
	uint b = AS_UINT(f);
	uint sgn = (b >> 16) & 0x8000u;
	int be = (int)((b >> 23) & 0xffu);
	if (be == 0xff) return (ushort)(sgn | ((b & 0x7fffffu) != 0u ? 0x7e00u : 0x7c00u));
	if (be == 0) return (ushort)sgn; // zero, or an F32 subnormal: far below F16's subnormals
	int e = be - 112;                   // F16's biased exponent
	if (e >= 31) return (ushort)(sgn | 0x7c00u);
	uint sig = (b & 0x7fffffu) | 0x800000u;
	int shift = 13;
	uint base = 0u;
	if (e >= 1) {
		// (e−1)·2¹⁰ plus the rounded significand, whose hidden bit is 2¹⁰: a carry out of the
		// fraction moves the exponent (to infinity from the largest binade).
		base = (uint)(e - 1) << 10;
	} else {
		shift = 14 - e; // a subnormal half: the significand in units of 2⁻²⁴
		if (shift > 24) return (ushort)sgn;
	}
	uint q = sig >> shift;
	uint rem = sig & ((1u << shift) - 1u);
	uint tie = 1u << (shift - 1);
	if (rem > tie || (rem == tie && (q & 1u) == 1u)) q++;
	return (ushort)(sgn | (base + q));
}

FUNC float4 f16x4_to_f32(const GLOBAL ushort* p) {
	float4 v;
	v.x = f16_to_f32(p[0]);
	v.y = f16_to_f32(p[1]);
	v.z = f16_to_f32(p[2]);
	v.w = f16_to_f32(p[3]);
	return v;
}

// LOAD8_W(p, i, o) sets o[0..7] to elements i..i+7 with one or two 16-byte loads; i is a multiple
// of 8 and p is 16-byte aligned.
#define LOAD8_bf16(p, i, o) { uint4 u_ = VLOAD(uint4, (p) + (i)); \
	o[0] = bf16_lo(u_.x); o[1] = bf16_hi(u_.x); o[2] = bf16_lo(u_.y); o[3] = bf16_hi(u_.y); \
	o[4] = bf16_lo(u_.z); o[5] = bf16_hi(u_.z); o[6] = bf16_lo(u_.w); o[7] = bf16_hi(u_.w); }
#define LOAD8_f16(p, i, o) { uint4 u_ = VLOAD(uint4, (p) + (i)); \
	o[0] = f16_lo(u_.x); o[1] = f16_hi(u_.x); o[2] = f16_lo(u_.y); o[3] = f16_hi(u_.y); \
	o[4] = f16_lo(u_.z); o[5] = f16_hi(u_.z); o[6] = f16_lo(u_.w); o[7] = f16_hi(u_.w); }
#define LOAD8_f32(p, i, o) { float4 a_ = VLOAD(float4, (p) + (i)); float4 b_ = VLOAD(float4, (p) + (i) + 4); \
	o[0] = a_.x; o[1] = a_.y; o[2] = a_.z; o[3] = a_.w; o[4] = b_.x; o[5] = b_.y; o[6] = b_.z; o[7] = b_.w; }

// MXFP4 (GPT-OSS's experts; package quant has the format): e2m1_value(c) is the E2M1 code in
// c's low four bits as F32, exactly (sign bit 8; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6), and
// e8m0_value(s) the scale byte s as 2^(s−127), exactly (2⁻¹²⁷ a subnormal, 255 +Inf, as quant).
FUNC float e2m1_value(uint c) {
	uint m = c & 7u;
	uint bits = m == 0u ? 0u : (m == 1u ? 0x3f000000u : (((m >> 1) + 126u) << 23) | ((m & 1u) << 22));
	return AS_FLOAT(bits | ((c & 8u) << 28));
}
FUNC float e8m0_value(uint s) { return AS_FLOAT(s == 0u ? 0x00400000u : s << 23); }

// The x of the packed matmuls (mma.kern's matmul_mma_X_bf16_S), by where it comes from: X =
// packed, x as it is, F32 rows; X = xs, x split once by mma_split_x (mmasplit.kern) into slots of
// the matrix unit's B operand, 256 words for each group of 8 rows (rows padded to 32) and chunk of
// 32. xin_X is the buffer's element type; for rows r … r+7 (r a multiple of 8) and chunk c:
// XFETCH_X starts their copy into a ring slot and XB_SLOT_X reads the slot back as the B operand,
// the same B either way, so the same bits.
typedef float xin_packed;
typedef uint xin_xs;
#define XFETCH_packed(slot, x, r, c, kdim, chunks, rows) MMA_FETCH_X(slot, (x) + (ulong)(r) * (kdim) + (c) * 32, kdim, (rows) - (r))
#define XFETCH_xs(slot, x, r, c, kdim, chunks, rows) MMA_FETCH_XS(slot, (x) + ((ulong)((r) / 8) * (chunks) + (c)) * 256)
#define XB_SLOT_packed(b, slot, stage) { MMA_X xv_; MMA_X_OF(xv_, slot); MMA_B_OF(b, xv_, stage); }
#define XB_SLOT_xs(b, slot, stage) MMA_B_OF_SLOT(b, slot, stage)

// Error codes written to the error word; the backends turn them into messages.
#define ERR_EMBED 1
#define ERR_GATHER 2
#define ERR_KVWRITE 3
#define ERR_ATTENTION 4
#define ERR_EXPERT 5
#define ERR_STEP 6

// STEP_BAD says that a step (row r, state rows from and to) of a DeltaNet step list
// (deltanet.kern) is outside the rows or the states; from may be −1, a zero state.
#define STEP_BAD(r, from, to, rows, states) ((r) < 0 || (r) >= (rows) || (from) < -1 || (from) >= (states) || (to) < 0 || (to) >= (states))

// ARGMAX_256(t, row, n, value, index) sets t, in every thread of a group of 256, to the index of
// the largest of row[0 … n−1], ties to the lowest index (as the host's argmax), 0 if none is
// above −∞: each thread scans a stride of the row in index order, then a tree of (value, index)
// pairs keeps the larger value, or the lower index on a tie. value and index are group-shared arrays of
// 256 (float, int), free again when it returns.
#define ARGMAX_256(t, row, n, value, index)                                                             \
	{                                                                                                  \
		float v_ = NEG_INF;                                                                            \
		int at_ = (n);                                                                                 \
		for (int i_ = LOCAL_X; i_ < (n); i_ += 256) {                                                  \
			float x_ = (row)[i_];                                                                      \
			if (x_ > v_ || (x_ == v_ && i_ < at_)) {                                                   \
				v_ = x_;                                                                               \
				at_ = i_;                                                                              \
			}                                                                                          \
		}                                                                                              \
		value[LOCAL_X] = v_;                                                                           \
		index[LOCAL_X] = at_;                                                                          \
		BARRIER();                                                                                     \
		for (int s_ = 128; s_ > 0; s_ >>= 1) {                                                         \
			if (LOCAL_X < s_) {                                                                        \
				float w_ = value[LOCAL_X + s_];                                                        \
				int j_ = index[LOCAL_X + s_];                                                          \
				if (w_ > value[LOCAL_X] || (w_ == value[LOCAL_X] && j_ < index[LOCAL_X])) {            \
					value[LOCAL_X] = w_;                                                               \
					index[LOCAL_X] = j_;                                                               \
				}                                                                                      \
			}                                                                                          \
			BARRIER();                                                                                 \
		}                                                                                              \
		t = index[0] < (n) ? index[0] : 0;                                                             \
		BARRIER();                                                                                     \
	}

// Attention's split of the keys by position (attention.kern; kernels.AttentionChunk and
// kernels.AttentionSplits say the same): keys in chunks of ATTN_CHUNK, the chunks in at most
// ATTN_SPLITS splits.
#define ATTN_CHUNK 64
#define ATTN_SPLITS 16
// attention_warp's ring runs ATTN_AHEAD items of sixteen rows ahead of its sums (8 KiB each).
#define ATTN_AHEAD 2

// Quantized weights (src/quant.kern), read as 16-bit words.

// q8_0_scale and q8_0_word are the F16 scale of block b of a Q8_0 row (17 words a block) and
// quant word k of it (quants 4k … 4k+3, a byte each).
FUNC float q8_0_scale(const GLOBAL ushort* row, int b) { return f16_to_f32(row[b * 17]); }
FUNC uint q8_0_word(const GLOBAL ushort* row, int b, int k) {
	return (uint)row[b * 17 + 1 + 2 * k] | ((uint)row[b * 17 + 2 + 2 * k] << 16);
}

// q4_0_scale and q4_0_word are the F16 scale of block b of a Q4_0 row (9 words a block) and the
// nibbles of its elements 4k … 4k+3, a byte each: the low nibbles of bytes 4k … 4k+3 for k < 4,
// the high nibbles of bytes 4(k−4) … 4(k−4)+3 for k ≥ 4.
FUNC float q4_0_scale(const GLOBAL ushort* row, int b) { return f16_to_f32(row[b * 9]); }
FUNC uint q4_0_word(const GLOBAL ushort* row, int b, int k) {
	int j = k & 3;
	uint word = (uint)row[b * 9 + 1 + 2 * j] | ((uint)row[b * 9 + 2 + 2 * j] << 16);
	return (word >> (k < 4 ? 0 : 4)) & 0x0f0f0f0fu;
}

// qbyte is byte o of a row read as 16-bit words (little-endian).
FUNC uint qbyte(const GLOBAL ushort* row, int o) { return ((uint)row[o >> 1] >> (8 * (o & 1))) & 0xffu; }

// qword is the 32-bit word at byte o (even) of a row read as 16-bit words.
FUNC uint qword(const GLOBAL ushort* row, int o) { return (uint)row[o >> 1] | ((uint)row[(o >> 1) + 1] << 16); }

// Q4_K (72 words a super-block: d, dmin, 12 bytes of scales and mins, 128 bytes of nibbles) and
// Q6_K (105 words: 128 bytes of low nibbles, 64 of high bits, 16 int8 scales, d), as package quant
// lays them out. Activation block b is sub-block j = b%8 of super-block b/8.

// q4_k_scale_min is sub-block j's 6-bit scale and min from the super-block's 12 scale bytes at
// byte 4 of sb (ggml's get_scale_min_k4): the scale in the low half, the min in the high.
FUNC uint q4_k_scale_min(const GLOBAL ushort* sb, int j) {
	if (j < 4) return (qbyte(sb, 4 + j) & 63u) | ((qbyte(sb, 8 + j) & 63u) << 16);
	uint sc = (qbyte(sb, 8 + j) & 15u) | ((qbyte(sb, j) >> 6) << 4);
	uint m = (qbyte(sb, 8 + j) >> 4) | ((qbyte(sb, 4 + j) >> 6) << 4);
	return sc | (m << 16);
}

// q4_k_word is the nibbles of elements 4k … 4k+3 of sub-block j, a byte each: sub-blocks 2r and
// 2r+1 share the 32 bytes of run r, in their low and high nibbles.
FUNC uint q4_k_word(const GLOBAL ushort* sb, int j, int k) {
	return (qword(sb, 16 + 32 * (j >> 1) + 4 * k) >> (4 * (j & 1))) & 0x0f0f0f0fu;
}

// q6_k_word is the 6-bit quants of elements 4k … 4k+3 of sub-block j, a byte each: the low
// nibbles from ql, the top two bits from qh.
FUNC uint q6_k_word(const GLOBAL ushort* sb, int j, int k) {
	int h = j >> 2, jj = j & 3;
	uint lo = (qword(sb, 64 * h + 32 * (jj & 1) + 4 * k) >> (4 * (jj >> 1))) & 0x0f0f0f0fu;
	uint hi = (qword(sb, 128 + 32 * h + 4 * k) >> (2 * jj)) & 0x03030303u;
	return lo | (hi << 4);
}

// q6_k_scale is the int8 scale of elements 4k … 4k+3 of sub-block j (scales[2j + k/4]).
FUNC int q6_k_scale(const GLOBAL ushort* sb, int j, int k) {
	return (int)(qbyte(sb, 192 + 2 * j + (k >> 2)) << 24) >> 24;
}

// q4_k_step is one block of a lane of quant's DotQ4_K: s = Σq·x and t = Σx, exact, then
// fma(d·dx, sc·s, acc) and fma(dmin·dx, −m·t, ·); sc·s and m·t are integers below 2²⁴.
FUNC float q4_k_step(float acc, float d, float dmin, uint scmin, uint nibbles, uint xq, float dx) {
	int t = DOT4_I8(0x01010101u, xq);
	int s = DOT4_I8(nibbles, xq);
	acc = FMA(MUL(d, dx), (float)((int)(scmin & 0xffffu) * s), acc);
	return FMA(MUL(dmin, dx), (float)(-(int)(scmin >> 16) * t), acc);
}

// q6_k_step is one block of a lane of quant's DotQ6_K: s = Σ(q − 32)·x, exact, then
// fma(d·dx, scale·s, acc).
FUNC float q6_k_step(float acc, float d, int scale, uint q, uint xq, float dx) {
	int s = DOT4_I8(q, xq) - 32 * DOT4_I8(0x01010101u, xq);
	return FMA(MUL(d, dx), (float)(scale * s), acc);
}

// lanes8_sum is the sum of s over the eight lanes of a column (lanes 8j … 8j+7 of a warp), in
// each of them: integers, so exact in any order.
FUNC int lanes8_sum(int s) {
	s += SHFL_XOR(s, 1);
	s += SHFL_XOR(s, 2);
	return s + SHFL_XOR(s, 4);
}

// q8_0_block is one block of package quant's block-order dot product (Q8_0), taken by the eight
// lanes of a column together: lane k's exact integer sum of its four products (weight quants wq,
// activation quants xq: elements 4k … 4k+3), the eight lanes' sums added into the block's s, then
// acc = fma(dw·dx, s, acc), the same bits in every lane. The lanes of the warp must all call it.
FUNC float q8_0_block(float acc, float dw, uint wq, uint xq, float dx) {
	int s = lanes8_sum(DOT4_I8(wq, xq));
	return FMA(MUL(dw, dx), (float)s, acc);
}

// q4_0_block is q8_0_block for Q4_0 nibbles: each quant is its nibble − 8, so a lane's sum is
// Σ nibble·x − 8·Σx, both exact.
FUNC float q4_0_block(float acc, float dw, uint nibbles, uint xq, float dx) {
	int s = lanes8_sum(DOT4_I8(nibbles, xq) - 8 * DOT4_I8(0x01010101u, xq));
	return FMA(MUL(dw, dx), (float)s, acc);
}

// lanes_sum combines the eight lanes of a column in the lane order,
// ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), in each of them: a butterfly over xor distances 1, 2, 4
// (a+b = b+a, so every lane ends with the same bits).
FUNC float lanes_sum(float acc) {
	acc = ADD(acc, SHFL_XOR(acc, 1));
	acc = ADD(acc, SHFL_XOR(acc, 2));
	return ADD(acc, SHFL_XOR(acc, 4));
}

// affine_step is one block of a lane of quant's affine dot product: with the codes made signed
// (wq, each code − 128), s = Σ(code − 128)·x + 128·t and t = Σx, both exact; then
// fma(scale·dx, s, acc) and fma(bias·dx, t, ·).
FUNC float affine_step(float acc, float scale, float bias, uint wq, uint xq, float dx) {
	int t = DOT4_I8(0x01010101u, xq);
	int s = DOT4_I8(wq, xq) + 128 * t;
	acc = FMA(MUL(scale, dx), (float)s, acc);
	return FMA(MUL(bias, dx), (float)t, acc);
}

// affine_scale_S(p, i) is element i of an affine matrix's scales (or biases) of dtype S,
// widened exactly to F32.
FUNC float affine_scale_bf16(const GLOBAL ushort* p, ulong i) { return AS_FLOAT((uint)p[i] << 16); }
FUNC float affine_scale_f16(const GLOBAL ushort* p, ulong i) { return f16_to_f32(p[i]); }
FUNC float affine_scale_f32(const GLOBAL ushort* p, ulong i) { return AS_FLOAT((uint)p[2 * i] | ((uint)p[2 * i + 1] << 16)); }

// affine_code is the bits-bit code at bit at of a packed affine row: MLX's codes form one
// little-endian bit stream, code i in bits i·bits … (i+1)·bits−1.
FUNC uint affine_code(const GLOBAL ushort* row, ulong at, int bits) {
	ulong u = at >> 4;
	int sh = (int)(at & 15);
	uint v = (uint)row[u];
	if (sh + bits > 16) v |= (uint)row[u + 1] << 16;
	return (v >> sh) & ((1u << bits) - 1u);
}

// affine_codes4 is the codes of elements e … e+3 (e a multiple of 4) of a packed affine row,
// code e+i in byte i. It reads only the words that hold them.
FUNC uint affine_codes4(const GLOBAL ushort* row, int e, int bits) {
	if (bits == 8) return (uint)row[e >> 1] | ((uint)row[(e >> 1) + 1] << 16);
	if (bits == 4) {
		uint h = (uint)row[e >> 2];
		return (h & 0xfu) | ((h & 0xf0u) << 4) | ((h & 0xf00u) << 8) | ((h & 0xf000u) << 12);
	}
	ulong at = (ulong)e * bits;
	ulong u = at >> 4;
	int sh = (int)(at & 15);
	int n = sh + 4 * bits;
	ulong v = (ulong)row[u];
	if (n > 16) v |= (ulong)row[u + 1] << 16;
	if (n > 32) v |= (ulong)row[u + 2] << 32;
	uint m = (1u << bits) - 1u;
	uint c = 0;
	UNROLL
	for (int i = 0; i < 4; i++) c |= ((uint)(v >> (sh + i * bits)) & m) << (8 * i);
	return c;
}

// qstep_F is one block of a lane of expert_qmatmul_F_R (src/experts.kern): lane k's share of block
// b of weight row `row` of a stack of `rows` rows of kdim elements (an affine format's bits and
// group size in bits and gsize; the parameters a format does not read are left unnamed), loaded
// as qmatmul_F_R loads it and added against a block of activations (xq, dx) with its step, so a
// lane's sums are qmatmul_F_R's. The weights come whole from these arguments, so a kernel calls
// it once for each row that shares them, with the same loads (which the compiler may share).
FUNC float qstep_q8_0(float acc, const GLOBAL ushort* w, ulong row, ulong /* rows */, int kdim, int b, int k, int /* bits */, int /* gsize */, uint xq, float dx) {
	const GLOBAL ushort* wr = w + row * (ulong)(kdim >> 5) * 17;
	return q8_0_block(acc, q8_0_scale(wr, b), q8_0_word(wr, b, k), xq, dx);
}

FUNC float qstep_q4_0(float acc, const GLOBAL ushort* w, ulong row, ulong /* rows */, int kdim, int b, int k, int /* bits */, int /* gsize */, uint xq, float dx) {
	const GLOBAL ushort* wr = w + row * (ulong)(kdim >> 5) * 9;
	return q4_0_block(acc, q4_0_scale(wr, b), q4_0_word(wr, b, k), xq, dx);
}

FUNC float qstep_q4_k(float acc, const GLOBAL ushort* w, ulong row, ulong /* rows */, int kdim, int b, int k, int /* bits */, int /* gsize */, uint xq, float dx) {
	const GLOBAL ushort* sb = w + (row * (ulong)(kdim >> 8) + (ulong)(b >> 3)) * 72;
	return q4_k_step(acc, f16_to_f32(sb[0]), f16_to_f32(sb[1]), q4_k_scale_min(sb, b & 7), q4_k_word(sb, b & 7, k), xq, dx);
}

FUNC float qstep_q6_k(float acc, const GLOBAL ushort* w, ulong row, ulong /* rows */, int kdim, int b, int k, int /* bits */, int /* gsize */, uint xq, float dx) {
	const GLOBAL ushort* sb = w + (row * (ulong)(kdim >> 8) + (ulong)(b >> 3)) * 105;
	return q6_k_step(acc, f16_to_f32(sb[104]), q6_k_scale(sb, b & 7, k), q6_k_word(sb, b & 7, k), xq, dx);
}

// An affine stack keeps every row's codes, then every row's scales, then every row's biases.
#define QSTEP_AFFINE(S)                                                                                   \
	FUNC float qstep_affine_##S(float acc, const GLOBAL ushort* w, ulong row, ulong rows, int kdim, int b, \
			int k, int bits, int gsize, uint xq, float dx) {                                          \
		ulong rowWords = (ulong)(kdim * bits / 16);                                                       \
		ulong groups = (ulong)(kdim / gsize);                                                             \
		const GLOBAL ushort* scales = w + rows * rowWords;                                                \
		ulong g = row * groups + (ulong)((b * 32) / gsize);                                               \
		uint wq = affine_codes4(w + row * rowWords, b * 32 + 4 * k, bits) ^ 0x80808080u;                  \
		return affine_step(acc, affine_scale_##S(scales, g), affine_scale_##S(scales, rows * groups + g), wq, xq, dx); \
	}
QSTEP_AFFINE(bf16)
QSTEP_AFFINE(f16)
QSTEP_AFFINE(f32)

// qend_F ends a column's dot product of format F in expert_qmatmul_F_R: the lane order's
// lanes_sum, or for the block order's formats nothing, each lane holding the column's chain.
FUNC float qend_q8_0(float acc) { return acc; }
FUNC float qend_q4_0(float acc) { return acc; }
FUNC float qend_q4_k(float acc) { return lanes_sum(acc); }
FUNC float qend_q6_k(float acc) { return lanes_sum(acc); }
FUNC float qend_affine_bf16(float acc) { return lanes_sum(acc); }
FUNC float qend_affine_f16(float acc) { return lanes_sum(acc); }
FUNC float qend_affine_f32(float acc) { return lanes_sum(acc); }
