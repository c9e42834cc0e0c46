// Package compute is the contract between the engine and its backends: dtypes, device tensors, the
// KV pool and the small op set a Llama/Qwen-family forward pass needs, mixtures of experts
// included.
//
// The contract is shaped for GPUs. Tensors live in the backend's memory and are opaque to callers;
// ops are enqueued and may run asynchronously; the only points where the host waits are ReadFloat32,
// ReadInt32, ReadKV and Sync. A forward works on rows: each row is one token of one session at an absolute position,
// and rows of many sessions share every op.
//
// Batch invariance is part of the contract: the bits a row produces must not depend on how many
// other rows share the op or where the row sits among them. Every reduction over a row (dot
// products, norms, softmax) runs in one fixed order for that row alone; a backend never splits a
// reduction differently because the row count changed. A mixture of experts keeps it too: its
// rows are grouped by expert on the device, and each pair of a row and an expert is computed
// alone in its dot products' fixed order, whatever else chose that expert.
//
// Backends register themselves by name, as database/sql drivers do, and are opened with Open.
package compute

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"
)

// DType is the element type of a tensor.
type DType uint8

// The dtypes the contract knows. Weights may arrive as F32, F16 or BF16, or quantized (Q8_0,
// Q4_0, Q4_K, Q6_K and the affine dtypes, in quantized.go); activations are F32; token ids and positions are
// I32.
const (
	F32 DType = iota + 1
	F16
	BF16
	I32
)

// Size returns the bytes one element of d occupies; 0 for a quantized dtype, whose elements share
// blocks (see Bytes).
func (d DType) Size() int {
	switch d {
	case F32, I32:
		return 4
	case F16, BF16:
		return 2
	}
	return 0
}

func (d DType) String() string {
	switch d {
	case F32:
		return "F32"
	case F16:
		return "F16"
	case BF16:
		return "BF16"
	case I32:
		return "I32"
	}
	if s := d.quantizedString(); s != "" {
		return s
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Tensor is a row-major buffer in a backend's memory. It is only meaningful to the backend that
// made it; passing it to another backend panics.
type Tensor interface {
	DType() DType
	// Shape returns the tensor's dimensions, outermost first. The caller must not modify it.
	Shape() []int
}

// KV is a pool of key/value slots for every layer of a model. A slot holds one token's keys and
// values (kvHeads × headDim each) in every layer. Sessions are ranges of slots chosen by the
// caller: a session that starts at slot base keeps position p in slot base+p.
type KV interface {
	// Slots returns the number of token slots in the pool.
	Slots() int
}

// KVSpec describes a KV pool.
type KVSpec struct {
	Layers  int
	KVHeads int
	HeadDim int
	Slots   int
	// DType is how the pool stores keys and values: F32 (zero means F32) or F16. An F16 pool
	// rounds each key and value to the nearest F16 (quant.F32ToF16) as KVWrite stores it and
	// widens it exactly where attention reads it; attention's arithmetic is F32 either way, so
	// an F16 pool's results are those of an F32 pool given the rounded keys and values.
	DType DType
}

// Elem returns the dtype the pool stores: DType, or F32 where it is zero.
func (s KVSpec) Elem() DType {
	if s.DType == 0 {
		return F32
	}
	return s.DType
}

// Bytes returns the memory the pool needs.
func (s KVSpec) Bytes() int64 {
	return 2 * int64(s.Layers) * int64(s.KVHeads) * int64(s.HeadDim) * int64(s.Slots) * int64(s.Elem().Size())
}

// CheckKVDType returns an error unless d is a dtype a KV pool may store (F32, F16 or zero).
func CheckKVDType(d DType) error {
	if d != 0 && d != F32 && d != F16 {
		return fmt.Errorf("a KV pool stores F32 or F16, not %v", d)
	}
	return nil
}

// Backend is one device that holds tensors and runs ops on them. A Backend is not safe for
// concurrent use: one goroutine drives it (GPU contexts belong to one OS thread).
//
// In every op, rows counts the leading rows that take part; tensors may be allocated for more rows
// than a given call uses (scratch sized for the largest round). Rows beyond rows are left alone.
type Backend interface {
	// Name returns the name the backend registered under.
	Name() string
	// Memory returns the bytes of memory this backend can give tensors: device memory for a GPU,
	// RAM for the CPU.
	Memory() uint64

	// Upload copies a host tensor, stored little-endian in dtype, into the backend. The backend
	// may keep it in a wider dtype (both backends widen 1-D vectors such as norm weights to F32
	// and keep matrices as they come); DType reports what it keeps. data is not retained. A
	// quantized dtype's bytes are in its format's layout (see Q8_0); a backend without kernels
	// for one returns an error wrapping ErrNoQuantizedKernels.
	Upload(dtype DType, shape []int, data []byte) (Tensor, error)
	// Alloc returns a zeroed tensor of F32 or I32 for activations and row metadata.
	Alloc(dtype DType, shape ...int) (Tensor, error)
	// NewKV returns a zeroed KV pool.
	NewKV(spec KVSpec) (KV, error)
	// Free releases a tensor once the work enqueued so far is done with it; nil is a no-op.
	// Using it afterwards is a bug.
	Free(t Tensor)
	// FreeKV releases a KV pool as Free releases a tensor.
	FreeKV(kv KV)

	// WriteInt32 enqueues a copy of src into the first len(src) elements of the I32 tensor dst.
	// The backend copies src before returning, so the caller may reuse it at once.
	WriteInt32(dst Tensor, src []int32)
	// ReadFloat32 waits for all enqueued work and copies the first len(dst) elements of the F32
	// tensor src into dst.
	ReadFloat32(src Tensor, dst []float32) error
	// ReadInt32 waits for all enqueued work and copies the first len(dst) elements of the I32
	// tensor src into dst.
	ReadInt32(src Tensor, dst []int32) error
	// ReadKV waits for all enqueued work and copies n slots of kv starting at slot, in every
	// layer, into dst, laid out the same on every backend: for each layer in order, the keys of
	// the n slots, then their values, each slot kvHeads×headDim elements of the pool's dtype,
	// little-endian, bits unchanged. len(dst) must be kv's KVSpec with Slots n, in Bytes, else it panics; a range
	// outside the pool is an error, and dst is left alone.
	ReadKV(kv KV, slot, n int, dst []byte) error
	// WriteKV enqueues a copy of src, laid out as ReadKV writes it, into the slots of kv from
	// slot on; len(src) says how many slots. The backend copies src before returning, so the
	// caller may reuse it at once. A length that is not a whole number of slots panics; a range
	// outside the pool is reported by the next Sync, and nothing is written.
	WriteKV(kv KV, slot int, src []byte)
	// Sync waits for all enqueued work and reports the first error it met, if any.
	Sync() error
	// Close releases the backend and everything it allocated.
	Close() error

	Ops
}

// InPlaceUploader is implemented by a backend whose memory is the host's (the cpu backend). It
// lets the engine hand over a memory-mapped checkpoint's bytes without a second copy: the weights
// are then resident once, as the file's pages, rather than as the file's pages and the backend's
// copy together.
type InPlaceUploader interface {
	// UploadInPlace is Upload with data that the caller keeps valid and unchanged until the
	// tensor is freed: the backend may use data where it lies instead of copying it, where the
	// layout it stores is the layout it computes on (it copies otherwise, as Upload does). It
	// never writes to data, which may be a read-only mapping.
	UploadInPlace(dtype DType, shape []int, data []byte) (Tensor, error)
}

// Arithmetic is implemented by a backend that can compute a model's numbers in more than one way
// chosen at open (the cuda backend's BF16 matmuls on the tensor cores, or on the CUDA cores with
// TFD_CUDA_MMA=0): each way gives its own bits. Arithmetic names the way this backend computes, so
// that the prompt cache keeps the blocks of one way from a load that computes the other
// (engine's Model.Identity hashes it beside the backend's name).
type Arithmetic interface {
	Arithmetic() string
}

// Ops is the op set of a forward pass. All float math is F32 with F32 accumulation whatever the
// weight dtype. Vectors are packed back to back: a row's stride is the op's natural length (in,
// out, dim, heads×headDim), not the tensor's last dimension, so scratch tensors need only enough
// elements. "n vectors" counts them. Outputs must not overlap inputs unless an op says so.
//
// Ops return no errors: misuse (a foreign tensor, a wrong dtype, a tensor too small) panics, and
// bad data (a token, index or slot out of range) is reported by the next Sync or ReadFloat32.
type Ops interface {
	// Embed writes table[tokens[r]] into x[r] for r < rows. table is [vocab, dim], x is [*, dim].
	// A quantized table's rows are dequantized as package quant does (quant.DequantizeQ8_0, …).
	Embed(x, table, tokens Tensor, rows int)
	// RMSNorm writes dst[i] = w ⊙ (x[i] · rsqrt(mean(x[i]²) + eps)) for n vectors of len(w) each,
	// in that order of operations (as transformers computes it).
	// dst and x may be the same tensor. With len(w) = headDim and n = rows×heads it is the
	// per-head q/k norm.
	RMSNorm(dst, x, w Tensor, n int, eps float32)
	// AddRMSNorm adds x into residual (residual[i] += x[i]) and then writes
	// dst[i] = RMSNorm(residual[i]) * w, for n vectors of len(w) each.
	AddRMSNorm(dst, residual, x, w Tensor, n int, eps float32)
	// MatMul writes dst[r][o] = Σ_i x[r][i]·w[o][i] + bias[o] for r < rows. w is [out, in] (the
	// checkpoint's layout); bias is nil or [out].
	//
	// With quantized weights the activations are quantized too: each row of x is quantized to 8
	// bits in blocks of 32 (quant.Activation), and dst[r][o] is package quant's dot product of w's
	// row o with it (quant.DotQ8_0, DotQ4_0, DotQ4_K, DotQ6_K or DotAffine, one fixed order), plus bias[o], bit for
	// bit. A row's bits then depend on the row alone, and every backend agrees with quant.
	MatMul(dst, x, w, bias Tensor, rows int)
	// RoPE rotates, in place, each of the heads in x[r] (x is [*, heads×headDim]) by the angles
	// positions[r]·invFreq[j], pairing element j with element j+headDim/2 ("rotate half"). invFreq
	// is [headDim/2] F32.
	RoPE(x, positions, invFreq Tensor, rows, heads int)
	// KVWrite stores k[r] and v[r] (each [*, kvHeads×headDim]) into slot bases[r]+positions[r] of
	// the given layer.
	KVWrite(kv KV, layer int, k, v, bases, positions Tensor, rows int)
	// Attention writes, for each row r and query head h, the softmax(scale·q·K)-weighted sum of V
	// over the slots bases[r] .. bases[r]+positions[r] inclusive of the given layer, reading KV head
	// h / (heads/kvHeads) (grouped-query attention). q and dst are [*, heads×headDim]. Keys are
	// visited in position order so each row's result is independent of the others.
	//
	// sinks is nil or [heads] F32: head h's sink is a learned logit that joins the softmax's
	// denominator and nothing else (GPT-OSS's attention sinks). With s_j the scaled scores and
	// m = max(sink_h, max_j s_j), the weights are exp(s_j − m) / (Σ_j exp(s_j − m) + exp(sink_h − m)).
	Attention(dst, q Tensor, kv KV, layer int, bases, positions, sinks Tensor, rows, heads int, scale float32)
	// SiLUMul writes dst[r] = silu(gate[r]) ⊙ up[r] for r < rows; dst may be gate.
	SiLUMul(dst, gate, up Tensor, rows int)
	// ClampedSwiGLU writes dst[r] = (clamp(up[r], −limit, limit) + 1) ⊙ g·σ(alpha·g) with
	// g = min(gate[r], limit), for r < rows, each step rounded in that order (GPT-OSS's experts;
	// σ(x) = 1/(1 + exp(−x))); dst may be gate.
	ClampedSwiGLU(dst, gate, up Tensor, rows int, alpha, limit float32)
	// GELUTanhMul writes dst[r] = gelu_tanh(gate[r]) ⊙ up[r] for r < rows, with PyTorch's
	// tanh approximation 0.5·g·(1 + tanh(√(2/π)·(g + 0.044715·g³))) (Gemma's MLP); dst may be gate.
	GELUTanhMul(dst, gate, up Tensor, rows int)
	// Add writes dst[r] = a[r] + b[r] for r < rows; dst may be a or b.
	Add(dst, a, b Tensor, rows int)
	// Gather writes dst[i] = src[index[i]] for i < rows (whole rows).
	Gather(dst, src, index Tensor, rows int)
	// RouteTopK picks each row's experts from its router scores (a mixture of experts): for
	// r < rows, with s = logits[r] (logits is [*, experts]), ids[r·k+j] for j < k are the k
	// best-scoring experts, best first, a higher score before a lower and the lower expert first
	// on a tie (NaN scores lowest), and weights[r·k+j] are their softmax probabilities over all
	// experts, exp(s_e − max s) divided by the sum of those exponentials (taken in one fixed
	// order), then divided by their own sum, in j order, when normalize is set. ids is I32 and
	// weights F32, both [*, k].
	RouteTopK(ids, weights, logits Tensor, rows, experts, k int, normalize bool)
	// GroupByExpert lists the n routed pairs of ids (I32; pair a = r·k+j is row r's j-th
	// choice, ids[a] its expert) by expert, into groups (I32, at least experts+1+n elements):
	// groups[e] is where expert e's run starts in the lists and groups[experts] where the last
	// one ends; from groups[experts+1] on, the runs follow in expert order, each listing its
	// pairs a in ascending order. A pair whose id is not an expert is in no run, and the next
	// Sync reports it. A run is the same whatever other rows share the call, so grouping adds no
	// dependence between rows.
	GroupByExpert(groups, ids Tensor, n, experts int)
	// ExpertMatMul runs each listed pair through its expert's matrix: for every pair a in the
	// runs of groups (GroupByExpert's layout, for experts = w's first dimension),
	// dst[a][o] = Σ_i x[a/share][i]·w[e][o][i] (+ bias[e][o]), where e is the run's expert, w is
	// [experts, out, in] and bias is nil or [experts, out] F32, added to the finished dot
	// product. share is k when x holds one row per token (all of a row's pairs read it: the
	// experts' gate and up projections) and 1 when it holds one per pair (their down
	// projection). n bounds the pairs (a < n). Each element is one dot product in an order fixed by
	// its length (MatMul's, except where a GPU backend runs MatMul on its matrix unit), so a
	// pair's bits depend neither on the pairs that share its expert nor
	// on where it sits among them. With quantized w (GGUF's and MLX's dtypes) a pair's row is
	// MatMul's of its expert's matrix on its x row, activations quantized and all. Rows of dst
	// whose pair is in no run are left alone.
	ExpertMatMul(dst, x, w, bias, groups Tensor, n, share int)
	// CombineExperts writes dst[r] = Σ_j weights[r·k+j]·x[r·k+j] for r < rows: each row's
	// expert outputs summed by rank, j = 0 … k−1, each product rounded before it is added (from
	// the first product on). x holds a row per pair, of dst's row length.
	CombineExperts(dst, x, weights Tensor, rows, k int)
	// CopyKV copies n slots of src starting at srcSlot to the slots of dst starting at dstSlot,
	// in every layer: the bits move unchanged (a session moving to a larger one, a block of the
	// prompt cache saved or restored). dst and src must have the same layers, KV heads, head
	// size and dtype, else it panics. They may be the same pool, and then the ranges may overlap.
	CopyKV(dst KV, dstSlot int, src KV, srcSlot, n int)
}

// Driver opens a backend.
type Driver interface {
	// Open returns a ready backend, or an error that says what is missing on this machine.
	Open() (Backend, error)
}

// ErrUnknownBackend is returned (wrapped) by Open for a name no driver registered under.
var ErrUnknownBackend = errors.New("compute: unknown backend")

// ErrNoDevice is wrapped by a driver's Open when this machine simply lacks its device or driver
// (no NVIDIA driver, not a Mac), as opposed to a device that is there but failed to open; callers
// trying backends in turn can pass over it quietly.
var ErrNoDevice = errors.New("compute: no such device on this machine")

var (
	driversMu sync.Mutex // guards drivers
	drivers   = map[string]Driver{}
)

// Register makes a backend driver available under name. It panics if driver is nil, the name is
// empty, or the name is taken; backends call it from init.
func Register(name string, driver Driver) {
	driversMu.Lock()
	defer driversMu.Unlock()
	if driver == nil {
		panic("compute: Register driver is nil")
	}
	if name == "" {
		panic("compute: Register with an empty name")
	}
	if _, dup := drivers[name]; dup {
		panic("compute: Register called twice for backend " + name)
	}
	drivers[name] = driver
}

// Drivers returns the sorted names of the registered backends.
func Drivers() []string {
	driversMu.Lock()
	defer driversMu.Unlock()
	names := make([]string, 0, len(drivers))
	for name := range drivers {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Open opens the backend registered under name.
func Open(name string) (Backend, error) {
	driversMu.Lock()
	driver, ok := drivers[name]
	driversMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w %q (registered: %v)", ErrUnknownBackend, name, Drivers())
	}
	b, err := driver.Open()
	if err != nil {
		return nil, fmt.Errorf("compute: open %s backend: %w", name, err)
	}
	return b, nil
}

// MultiMatMul is an optional interface of a Backend that can run several MatMuls of one x in one
// launch (a layer's q, k and v projections; its gate and up), which fills a GPU better than the
// small matrices one by one and saves launches.
type MultiMatMul interface {
	// MatMuls runs MatMul(dst[m], x, w[m], bias[m], rows) for each m whose w[m] is not nil; the
	// matrices have rows of one length. Each dst gets the bits MatMul gives it.
	MatMuls(dst [3]Tensor, x Tensor, w, bias [3]Tensor, rows int)
}

// SiLUMulMatMuler is an optional interface of a Backend that can feed a matmul the SwiGLU
// product as it prepares its x, where SiLUMul then MatMul would write the product and read it
// back, in a launch of its own.
type SiLUMulMatMuler interface {
	// SiLUMulMatMul does, where it can, MatMul(dst, silu(gate) ⊙ up, w, bias, rows) with the bits
	// of SiLUMul then MatMul, leaving gate and up as they are, and reports true; it does nothing
	// and reports false where it would not save a pass (then the caller runs the two ops).
	SiLUMulMatMul(dst, gate, up, w, bias Tensor, rows int) bool
}

// ForwardSizer is an optional interface of a Backend whose forwards run faster with more rows
// than the engine's default: a prompt alone then takes fewer, larger forwards.
type ForwardSizer interface {
	// ForwardRows returns the rows a forward should take where the model allows.
	ForwardRows() int
}

// HostBuffers is an optional interface of a Backend that reads into host memory of its own
// faster than into other memory (CUDA: page-locked memory the GPU copies into directly, where
// other memory takes a second copy, through a staging buffer, on the CPU).
type HostBuffers interface {
	// HostFloat32 returns n float32s of such memory, zeroed or not, valid until FreeHost or the
	// backend's Close.
	HostFloat32(n int) ([]float32, error)
	// FreeHost releases memory HostFloat32 returned, with no read into it under way.
	FreeHost(buf []float32)
}

// QKRoPEWriter is an optional interface of a Backend that makes a layer's queries and keys ready
// for attention in one launch where the ops one by one take five (per head, a launch costs a GPU
// more than the work).
type QKRoPEWriter interface {
	// QKRoPEWrite does, where it can, RMSNorm(q, q, qNorm, rows·heads) and RMSNorm(k, k, kNorm,
	// rows·kvHeads) (both norms nil: none), RoPE(q, ropePositions, invFreq, rows, heads) and
	// RoPE(k, ropePositions, invFreq, rows, kvHeads), then KVWrite(kv, layer, k, v, bases,
	// positions, rows), with the bits of those ops, and reports true; it does nothing and reports
	// false for shapes it does not take, and the caller runs the ops.
	QKRoPEWrite(q, k, v, qNorm, kNorm, ropePositions, invFreq Tensor, kv KV, layer int, bases, positions Tensor, rows, heads int, eps float32) bool
}

// Chainer is an optional interface of a Backend: an op that lets one forward's output feed the
// next on the device, so a greedy decode needs no host round trip between forwards (and, on a
// GPU, every step of the chain is the same commands, replayed as one graph).
type Chainer interface {
	// ArgmaxNext writes the index of the largest of the first n values of logits (ties to the
	// lowest index) into tokens[0] and chain[step] (I32 both), and adds one to positions[0]: the
	// next forward's row is the chosen token, one place further.
	ArgmaxNext(logits, tokens, positions, chain Tensor, n, step int)
}

// Picker is an optional interface of a Backend: the greedy picks of a forward's logits rows taken
// where the logits are, so that a round's greedy rows cross to the host as a token each instead of
// a row of logits (151,936 floats on Qwen3) and no host thread scans them.
type Picker interface {
	// ArgmaxRows writes to picks[r] (I32), for r < rows, the index of the largest of the n values
	// of logits row first+r, ties to the lowest index (as ArgmaxNext).
	ArgmaxRows(logits, picks Tensor, first, rows, n int)
}

// DraftVerifier is an optional interface of a Backend: the two ops of a greedy chain of verified
// drafts, which let a forward of a token and its drafts, the drafts' verification and the MTP
// head's next drafts follow one another on the device, the host reading back a few ints a step
// instead of the logits. Both read and write the forward's row tensors (I32: tokens, positions,
// ropePositions, sources, wanted) and a verdict (I32, VerdictLen(rows) values), laid out as:
//
//	verdict[0]               j, how many drafts landed
//	verdict[1+r], r < rows   the argmax of the forward's logits row r (ties to the lowest index)
//	verdict[1+rows+s]        the MTP head's draft s after the accepted tokens, s < rows-1
//	verdict[2·rows]          the position of the next forward's first row
type DraftVerifier interface {
	// VerifyDrafts reads the logits of a forward's rows rows (n values each) whose row 0 was a
	// token and rows 1 … rows-1 its drafts (tokens[1:rows]). It writes the argmax of each row and
	// j, the drafts that equal the argmax of the row before them, counted from the first and
	// stopping at the first that does not. Then it turns the row tensors into the MTP head's rows
	// for the forward's positions: tokens[r] the argmax of row r (the token after position r,
	// for r ≤ j), ropePositions[r] = positions[r]+1, sources[r] = r, and wanted[0] = j, so that
	// the head drafts from the last accepted position.
	VerifyDrafts(logits, tokens, positions, ropePositions, sources, wanted, verdict Tensor, rows, n int)
	// DraftNext reads the MTP head's one draft logits row (n values) and writes its argmax, draft
	// step of rows-1, into the verdict. Before the last step it makes the row tensors the head's
	// chained row: that draft as the token, one position after the row wanted[0] named, source 0.
	// At the last step it makes them the next forward's rows: the target's token after the
	// accepted drafts, then the head's drafts, from verdict[2·rows] on, all wanting logits.
	DraftNext(logits, tokens, positions, ropePositions, sources, wanted, verdict Tensor, rows, n, step int)
}

// VerdictLen returns the values of a DraftVerifier's verdict for a forward of rows rows.
func VerdictLen(rows int) int { return 2*rows + 1 }

// AsyncReader is an optional interface of a Backend whose ops run behind the calls that record
// them (a GPU's stream): it hands a few values back to the host without waiting for the work
// recorded after them, so that a greedy chain's host reads one step's token while the device runs
// the next step. A backend that runs each op as it is recorded has nothing to gain from it.
type AsyncReader interface {
	// ReadInt32Async records a copy of src's first n values (1 to MaxAsyncRead) for the host,
	// after the work recorded so far, sets all of that work going on the device, and returns at
	// once with the read's ticket.
	ReadInt32Async(src Tensor, n int) Ticket
	// AwaitInt32 waits for the read with ticket t, not for work recorded after it, and copies its
	// first len(dst) values into dst. A ticket is good for one await while it is among the last
	// AsyncReads reads; an older one is an error. A failure that the backend finds only at a Sync
	// (a kernel's own range checks) is reported by the next Sync, not here.
	AwaitInt32(t Ticket, dst []int32) error
}

// Ticket names one read of an AsyncReader.
type Ticket uint64

const (
	// MaxAsyncRead is the most values one ReadInt32Async copies.
	MaxAsyncRead = 64
	// AsyncReads is how many reads of an AsyncReader may wait to be awaited.
	AsyncReads = 8
)

// Warmer is an optional interface of a Backend whose device cools down while idle (a GPU lowers
// its clocks; macOS takes idle GPU memory back). The engine's Model.Warm calls it on the
// scheduler's idle tick, from the goroutine that drives the backend.
type Warmer interface {
	// Warm keeps the device ready while idle with a token amount of real work, waits for it, and
	// uses the moment to apply what waits for idleness (Metal commits the changes to its residency
	// set staged during the last request). It reports the work's error.
	Warm() error
}

// Elements returns the number of elements of a tensor of shape, or an error for a negative
// dimension or a count whose bytes would overflow an int. Backends size allocations with it.
func Elements(shape []int) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 || (d > 0 && n > math.MaxInt64/8/d) {
			return 0, fmt.Errorf("compute: bad tensor shape %v", shape)
		}
		n *= d
	}
	return n, nil
}

// CheckUpload checks the arguments of Backend.Upload, which every backend takes the same way,
// and returns the element count.
func CheckUpload(dtype DType, shape []int, data []byte) (int, error) {
	n, err := Elements(shape)
	if err != nil {
		return 0, err
	}
	size, err := dtype.Bytes(shape)
	if err != nil {
		return 0, err
	}
	if len(data) != size {
		return 0, fmt.Errorf("compute: Upload of %v %v needs %d bytes, got %d", dtype, shape, size, len(data))
	}
	return n, nil
}

// Resident is an optional interface of a Backend that holds its memory resident between requests
// and ticks the device while idle, so that the first token after a pause is as fast as the next
// (Metal's residency set). Its owner calls SetResidency once, after opening the backend and making
// the memory plan and before the first Upload, Alloc or NewKV; a backend never given options keeps
// its defaults. logger receives its reports (whole or none, the bytes held); nil keeps
// slog.Default(). ResidencyStats is safe to call from any goroutine (/metrics).
type Resident interface {
	SetResidency(opts ResidencyOptions, logger *slog.Logger) error
	ResidencyStats() ResidencyStats
}

// ResidencyOptions are the [residency] settings a Resident backend works with.
type ResidencyOptions struct {
	// Enabled holds every buffer in one residency set; false: none (residency.enabled).
	Enabled bool
	// Tick is how often an idle device is ticked (residency.tick); 0: 500 ms.
	Tick time.Duration
	// KeepWarm is how long after the last request the ticks go on (residency.keep_warm).
	KeepWarm time.Duration
	// Limit bounds the bytes held resident: the memory plan's limit. The keeper also never goes
	// above the device's recommendedMaxWorkingSetSize.
	Limit uint64
}

// ResidencyStats is what /metrics shows of the residency keeper.
type ResidencyStats struct {
	// On reports that every live buffer is held in one committed residency set whose residency
	// was requested. Off: residency.enabled is false, this macOS has no residency sets, or the
	// buffers passed the bound (whole or none).
	On bool
	// ResidentBuffers and ResidentBytes count the buffers in the set as last committed; 0 when off.
	ResidentBuffers uint64
	ResidentBytes   uint64
	// Commits counts the set's commits: the one at load, those at commit points, and the one that
	// empties the set when it is turned off after load.
	Commits uint64
	// Ticks counts idle ticks whose GPU work completed.
	Ticks uint64
}

// SharedMemory is an optional interface of a Backend whose device shares the host's memory
// (Apple silicon): its Memory is the machine's RAM, and WorkingSet what the GPU may hold at once
// (Metal's recommendedMaxWorkingSetSize), which the memory plan never passes.
type SharedMemory interface {
	WorkingSet() uint64
}
