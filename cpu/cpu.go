// Package cpu is the compute backend that runs on the host CPU, in pure Go, with AVX2/FMA assembly
// kernels on amd64 machines that have them. It registers itself as "cpu".
//
// Ops run synchronously when called, spread over a persistent pool of worker goroutines, one per
// GOMAXPROCS. Tensors hold F32, I32, or F16 and BF16 matrices as uploaded, which MatMul, Embed and
// Gather widen to F32 element by element as they read them (exactly, so that the bits are those of
// the same weights widened beforehand); F16 and BF16 vectors are widened when uploaded. Quantized
// matrices (Q8_0, Q4_0, Q4_K, Q6_K, MLX affine) keep their bytes, rearranged for the kernels
// (qweights).
//
// Batch invariance: every reduction over a row is computed by one routine in one fixed order,
// whatever the number of rows in the call, the row's index among them, or the number of
// goroutines. Work is split across goroutines only by whole output elements, rows or heads, never
// inside a reduction. The orders:
//
//   - A dot product over n elements (MatMul, attention scores, the sum of squares of RMSNorm):
//     eight lane accumulators, lane k summing the products of elements k, k+8, … of the first n&^7
//     elements, combined as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), then the remaining n&7 products
//     added one at a time, then the bias.
//   - The softmax denominator: exp(s_j − max) into lane j%8, the lanes combined as above (the
//     attention's scores and a router's over the experts).
//   - The attention output: Σ_j p_j·v_j per element, in position order.
//   - A mixture of experts: a row's chosen weights summed in pick order to renormalise them; each
//     pair of a row and an expert through the expert's matrices as MatMul's rows (gathered by
//     expert, which changes no bits), quantized experts' as quantized MatMul's rows; a row's
//     expert outputs summed by rank, each product rounded.
//   - A dot product with quantized weights: package quant's order, with the row's activations
//     quantized first: for Q8_0 and Q4_0 the block order (a block's exact integer sum, one fused
//     multiply-add a block, one chain from zero), for the others the lane order (exact integer
//     sums of each block's lanes, a fused multiply-add per block and lane, the tree above); here every kernel, Go, AVX2, AVX-512 VNNI and arm64's NEON
//     (with SDOT or without), gives the same bits.
//
// The AVX2 kernels compute each lane with fused multiply-adds, the pure-Go kernels with a rounded
// multiply and an add; a process uses one kind for every op, chosen at start-up.
package cpu

import (
	"errors"
	"fmt"
	"runtime"

	"tfd/compute"
)

func init() {
	compute.Register("cpu", driver{})
}

// driver opens CPU backends.
type driver struct{}

// Open returns a backend whose pool has one worker per GOMAXPROCS. It never fails.
func (driver) Open() (compute.Backend, error) {
	return newBackend(), nil
}

// backend is the CPU implementation of compute.Backend. Like every backend it is driven by one
// goroutine at a time; the worker pool is internal.
type backend struct {
	pool   *pool
	err    error // first data error an op met since the last Sync; see fail
	closed bool

	// One task value per op, reused by every call, so that handing a task to the pool allocates
	// nothing (a pointer in an interface does not escape to a new allocation).
	mm    matmulTask
	qmm   qmatmulTask
	qmms  qmatmulsTask
	qacts quantizeActs
	att   attentionTask
	norm  normTask
	rope  ropeTask
	elem  elemTask
	ckv   copyKVTask
	wkv   widenKVTask
	// attWide holds the slots of an F16 pool that one Attention call's prompt rows read, widened
	// once for all of them (attentionTask.widenShared); kept for the next call.
	attWide []float32

	route   routeTask
	expert  expertTask
	qexpert qexpertTask
	combine combineTask
	conv    convTask
	delta   deltaTask
	experts expertBuffers // ExpertMatMul's gathered rows and tiles, kept between calls

	qact []actBlock // the quantized activations of MatMul with quantized weights, grown as needed

	angles ropeAngles // the last RoPE call's cos and sin, which the next call at the same positions reuses
}

func newBackend() *backend {
	return &backend{pool: newPool(runtime.GOMAXPROCS(0))}
}

func (b *backend) Name() string { return "cpu" }

// Memory returns the machine's physical RAM in bytes, or 0 where it cannot be read.
func (b *backend) Memory() uint64 { return physicalMemory() }

// Sync reports, and forgets, the first data error (a token, index or slot out of range) that an
// op met since the previous Sync or ReadFloat32. Ops run as they are called, so there is nothing
// to wait for.
func (b *backend) Sync() error {
	err := b.err
	b.err = nil
	return err
}

// Close stops the worker pool. The backend must not be used afterwards; tensors it made are
// reclaimed by the garbage collector once unreferenced.
func (b *backend) Close() error {
	if b.closed {
		return errors.New("cpu: backend closed twice")
	}
	b.closed = true
	b.pool.close()
	return nil
}

// fail records a data error for the next Sync; the first one wins.
func (b *backend) fail(format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("cpu: "+format, args...)
	}
}

// run hands t to the pool: items [0, n) in chunks of grain, on at most par goroutines (the calling
// one included). Ops pass par = 1 when the work is too small to be worth waking workers.
func (b *backend) run(t task, n, grain, par int) {
	if b.closed {
		panic("cpu: op called on a closed backend")
	}
	b.pool.run(t, n, grain, par)
}

// parFor returns how many goroutines work of the given size (in multiply-adds or element
// touches) deserves: one per minWork, at least one.
func parFor(work int) int {
	const minWork = 1 << 16 // some 10 µs of work: less is not worth another goroutine
	return max(1, work/minWork)
}
