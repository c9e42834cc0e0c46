package cpu

import (
	"encoding/binary"
	"math"
	"runtime"
	"strings"
	"testing"

	"tfd/compute"
	"tfd/compute/computetest"
)

func TestRegistered(t *testing.T) {
	be, err := compute.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if be.Name() != "cpu" {
		t.Errorf("Name() = %q", be.Name())
	}
	if runtime.GOOS == "linux" || runtime.GOOS == "darwin" {
		if m := be.Memory(); m < 1<<28 {
			t.Errorf("Memory() = %d, want the machine's RAM", m)
		}
	}
}

// halfRef decodes a binary16 (ebits = 5, mbits = 10) or bfloat16 (8, 7) value from its fields
// with float64 arithmetic, independently of the bit manipulation under test.
func halfRef(h uint16, ebits, mbits uint) float64 {
	sign := 1.0
	if h>>15 == 1 {
		sign = -1
	}
	e := int(h>>mbits) & (1<<ebits - 1)
	m := float64(h & (1<<mbits - 1))
	bias := 1<<(ebits-1) - 1
	switch e {
	case 1<<ebits - 1:
		if m == 0 {
			return math.Inf(int(sign))
		}
		return math.NaN()
	case 0:
		return sign * m * math.Pow(2, float64(1-bias)-float64(mbits))
	}
	return sign * (1 + m/float64(uint(1)<<mbits)) * math.Pow(2, float64(e-bias))
}

// F16 and BF16 matrices stay 16-bit and vectors become F32; either way every value widens exactly
// (checked through a vector upload, Gather from a matrix, and the widening MatMul uses, with each
// kind of kernel).
func TestUploadHalfExact(t *testing.T) {
	forWeightKernels(t, func(t *testing.T) {
		b := newTest(t)
		for _, c := range []struct {
			dtype        compute.DType
			ebits, mbits uint
		}{{compute.F16, 5, 10}, {compute.BF16, 8, 7}} {
			t.Run(c.dtype.String(), func(t *testing.T) {
				data := make([]byte, 2*65536)
				for i := range 65536 {
					binary.LittleEndian.PutUint16(data[2*i:], uint16(i))
				}
				vec, err := b.Upload(c.dtype, []int{65536}, data)
				if err != nil {
					t.Fatal(err)
				}
				if vec.DType() != compute.F32 {
					t.Fatalf("vector: DType() = %v, want F32", vec.DType())
				}
				mat, err := b.Upload(c.dtype, []int{256, 256}, data)
				if err != nil {
					t.Fatal(err)
				}
				if mat.DType() != c.dtype || len(mat.(*tensor).h) != 65536 || mat.(*tensor).f != nil {
					t.Fatalf("matrix: DType() = %v, want %v kept 16-bit", mat.DType(), c.dtype)
				}
				idx := make([]int32, 256)
				for i := range idx {
					idx[i] = int32(i)
				}
				gathered := ften(t, b, nil, 256, 256)
				b.Gather(gathered, mat, iten(t, b, idx, 256), 256)
				operands := make([]float32, 65536)
				widenOperands(operands, mat.(*tensor).h, c.dtype)
				for _, got := range []struct {
					what  string
					f     []float32
					quiet bool // a signaling NaN may come back quieted
				}{{"vector", vec.(*tensor).f, false}, {"Gather", gathered.f, false}, {"widenOperands", operands, true}} {
					checkWidened(t, got.what, got.f, c.ebits, c.mbits, got.quiet)
				}
			})
		}
	})
}

// checkWidened compares got[i] with the value of the 16-bit pattern i.
func checkWidened(t *testing.T, what string, got []float32, ebits, mbits uint, quiet bool) {
	t.Helper()
	bad := 0
	for i := range 65536 {
		want := halfRef(uint16(i), ebits, mbits)
		g := math.Float32bits(got[i])
		ok := float64(got[i]) == want && math.Signbit(float64(got[i])) == math.Signbit(want)
		if math.IsNaN(want) {
			// A NaN keeps its sign and payload, top-aligned.
			payload := uint32(i) & (1<<mbits - 1)
			wantBits := uint32(i>>15)<<31 | 0x7f800000 | payload<<(23-mbits)
			ok = g == wantBits || quiet && g == wantBits|0x400000
		}
		if !ok {
			if bad++; bad <= 5 {
				t.Errorf("%s: %#04x: got %v (%#08x), want %v", what, i, got[i], g, want)
			}
		}
	}
}

func TestUploadF32AndI32(t *testing.T) {
	b := newTest(t)
	f := []float32{1.5, float32(math.Inf(-1)), math.Float32frombits(1), -0}
	data := make([]byte, 16)
	for i, v := range f {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	tf, err := b.Upload(compute.F32, []int{2, 2}, data)
	if err != nil {
		t.Fatal(err)
	}
	computetest.SameBits(t, "f32", tf.(*tensor).f, f)
	got := make([]float32, 4)
	if err := b.ReadFloat32(tf, got); err != nil {
		t.Fatal(err)
	}
	computetest.SameBits(t, "read", got, f)
	ti, err := b.Upload(compute.I32, []int{4}, data)
	if err != nil || ti.DType() != compute.I32 || ti.(*tensor).i[0] != int32(math.Float32bits(1.5)) {
		t.Fatalf("I32 upload: %v %v", err, ti)
	}
	if _, err := b.Upload(compute.F32, []int{3}, data); err == nil || !strings.HasPrefix(err.Error(), "cpu:") {
		t.Errorf("short data: err = %v", err)
	}
	if _, err := b.Alloc(compute.F16, 3); err == nil {
		t.Error("Alloc(F16) succeeded")
	}
}

func TestKVRoundTrip(t *testing.T) {
	b := newTest(t)
	const layers, kvHeads, hd, slots = 3, 2, 5, 40
	st := kvHeads * hd
	kvi, err := b.NewKV(kvSpec(layers, kvHeads, hd, slots))
	if err != nil {
		t.Fatal(err)
	}
	kv := kvi.(*kvPool)
	ks, vs := computetest.Randn(1, 4*st), computetest.Randn(2, 4*st)
	bases, pos := []int32{0, 0, 10, 10}, []int32{0, 3, 1, 2}
	for l := range layers {
		b.KVWrite(kv, l, ften(t, b, ks, 4, st), ften(t, b, vs, 4, st), iten(t, b, bases, 4), iten(t, b, pos, 4), 4)
	}
	b.CopyKV(kv, 20, kv, 10, 3) // session at 10 moves to 20
	for l := range layers {
		for r := range bases {
			s := int(bases[r] + pos[r])
			computetest.SameBits(t, name("k", l, r), kv.k[l][s*st:(s+1)*st], ks[r*st:(r+1)*st])
			computetest.SameBits(t, name("v", l, r), kv.v[l][s*st:(s+1)*st], vs[r*st:(r+1)*st])
		}
		computetest.SameBits(t, name("copied k", l), kv.k[l][20*st:23*st], kv.k[l][10*st:13*st])
		computetest.SameBits(t, name("copied v", l), kv.v[l][20*st:23*st], kv.v[l][10*st:13*st])
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
}

// Data errors (a bad token, index or slot) are reported by Sync once, and the backend goes on.
func TestDataErrors(t *testing.T) {
	b := newTest(t)
	table := ften(t, b, computetest.Randn(1, 12), 4, 3)
	x := ften(t, b, []float32{9, 9, 9}, 1, 3)
	b.Embed(x, table, iten(t, b, []int32{4}, 1), 1)
	if err := b.Sync(); err == nil || !strings.HasPrefix(err.Error(), "cpu: Embed") {
		t.Errorf("Sync after a bad token: %v", err)
	}
	if x.f[0] != 0 {
		t.Error("bad token's row not zeroed")
	}
	if err := b.Sync(); err != nil {
		t.Errorf("second Sync: %v", err)
	}
	kv := newKV(t, b, 1, 1, 4, 8)
	one := ften(t, b, nil, 1, 4)
	b.KVWrite(kv, 0, one, one, iten(t, b, []int32{6}, 1), iten(t, b, []int32{2}, 1), 1)
	b.CopyKV(kv, 6, kv, 0, 3)
	if err := b.Sync(); err == nil || !strings.Contains(err.Error(), "KVWrite") {
		t.Errorf("Sync after a bad slot: %v", err)
	}
}

type foreign struct{}

func (foreign) DType() compute.DType { return compute.F32 }
func (foreign) Shape() []int         { return []int{1} }

func TestForeignTensorPanics(t *testing.T) {
	b := newTest(t)
	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, "not a tensor of the cpu backend") {
			t.Errorf("panic %q", msg)
		}
	}()
	x := ften(t, b, nil, 1, 1)
	b.Add(x, x, foreign{}, 1)
}

// The ops allocate nothing in steady state, inline (AllocsPerRun runs with GOMAXPROCS 1) and on
// the pool (GOMAXPROCS > 1), where only allocations made by this package's code count: waking
// workers can make the runtime start threads, which allocates.
func TestNoAllocs(t *testing.T) {
	b := newTest(t)
	const in, out, rows, heads, kvHeads, hd = 256, 512, 16, 4, 2, 64
	x, w := ften(t, b, computetest.Randn(1, rows*in), rows, in), ften(t, b, computetest.Randn(2, out*in), out, in)
	dst := ften(t, b, nil, rows, out)
	nw := ften(t, b, computetest.Randn(3, in), in)
	kv := newKV(t, b, 1, kvHeads, hd, 256)
	q, att := ften(t, b, computetest.Randn(4, rows*heads*hd), rows, heads*hd), ften(t, b, nil, rows, heads*hd)
	bases, pos := iten(t, b, make([]int32, rows), rows), iten(t, b, nil, rows)
	for r := range rows {
		pos.i[r] = int32(200 + r)
	}
	inv := ften(t, b, computetest.Randn(5, hd/2), hd/2)
	// 16-bit weights, read directly (one row), widened in blocks (16 rows) or K-chunks (1100 long).
	const long = 1100
	xl, dl := ften(t, b, computetest.Randn(6, rows*long), rows, long), ften(t, b, nil, rows, out)
	var halfW, halfL []*tensor
	for _, dt := range halfTypes {
		h, _ := weightTensor(t, b, dt, 7, out, in)
		l, _ := weightTensor(t, b, dt, 8, out, long)
		halfW, halfL = append(halfW, h), append(halfL, l)
	}
	// Quantized weights: GGUF's blocks (the four-row kernels where the CPU has VNNI) and MLX's.
	var quants []*tensor
	affine, err := compute.Affine(4, 64, compute.F16)
	if err != nil {
		t.Fatal(err)
	}
	for _, dt := range []compute.DType{compute.Q8_0, compute.Q4_0, compute.Q4_K, compute.Q6_K, affine} {
		quants = append(quants, quantized(t, dt, out, in, 9).upload(t, b))
	}
	tokens := iten(t, b, []int32{1, 5, 2, 7}, 4)
	forward := func() {
		b.MatMul(dst, x, w, nil, rows)
		for _, qw := range quants {
			b.MatMul(dst, x, qw, nil, rows)
			b.MatMul(dst, x, qw, nil, 1)
		}
		for i := range halfW {
			b.MatMul(dst, x, halfW[i], nil, rows)
			b.MatMul(dst, x, halfW[i], nil, 1)
			b.MatMul(dl, xl, halfL[i], nil, rows)
			b.Embed(x, halfW[i], tokens, 4)
		}
		b.RMSNorm(x, x, nw, rows, 1e-6)
		b.AddRMSNorm(x, dst, x, nw, rows, 1e-6)
		b.RoPE(q, pos, inv, rows, heads)
		b.Attention(att, q, kv, 0, bases, pos, nil, rows, heads, 0.125)
		b.SiLUMul(dst, dst, dst, rows)
		b.Add(dst, dst, dst, rows)
	}
	if n := testing.AllocsPerRun(10, forward); n != 0 {
		t.Errorf("inline: %v allocations per forward", n)
	}
	withProcs(4, func() {
		forward() // let scratch grow and workers start
		if n := packageAllocs(func() {
			for range 20 {
				forward()
			}
		}); n != 0 {
			t.Errorf("pool: %d allocations in 20 forwards", n)
		}
	})
}

// packageAllocs returns the number of allocations made while f runs by functions of this package
// other than tests, from a memory profile that records every allocation.
func packageAllocs(f func()) int64 {
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1
	before := allocSites()
	f()
	var n int64
	for site, count := range allocSites() {
		n += count - before[site]
	}
	return n
}

// allocSites returns the allocation count of every profiled stack whose allocating function
// (below the runtime's allocation entry points) is this package's non-test code. Allocations the
// runtime makes for itself are left out: blocking on a channel may allocate a sudog, for one,
// after a collection has emptied the runtime's cache of them.
func allocSites() map[[32]uintptr]int64 {
	runtime.GC() // the profile is published at the end of a cycle
	runtime.GC()
	recs := make([]runtime.MemProfileRecord, 256)
	for {
		n, ok := runtime.MemProfile(recs, true)
		if ok {
			recs = recs[:n]
			break
		}
		recs = make([]runtime.MemProfileRecord, n+256)
	}
	sites := map[[32]uintptr]int64{}
	for _, r := range recs {
		frames := runtime.CallersFrames(r.Stack())
		for {
			fr, more := frames.Next()
			if allocEntry(fr.Function) && more {
				continue
			}
			if strings.HasPrefix(fr.Function, "tfd/cpu.") && !strings.HasSuffix(fr.File, "_test.go") {
				sites[r.Stack0] += r.AllocObjects
			}
			break
		}
	}
	return sites
}

// allocEntry reports whether fn is one of the runtime functions that compiled code calls to
// allocate (make, new, append, conversions to interfaces).
func allocEntry(fn string) bool {
	for _, p := range []string{"mallocgc", "newobject", "makeslice", "growslice", "makemap", "convT", "newarray", "makechan"} {
		if strings.HasPrefix(fn, "runtime."+p) {
			return true
		}
	}
	return false
}
