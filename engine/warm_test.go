package engine_test

import (
	"errors"
	"testing"

	"tfd/compute"
	"tfd/engine"
	"tfd/engine/enginetest"
)

// countingBackend counts the Add and Sync calls that reach a backend.
type countingBackend struct {
	compute.Backend
	adds, syncs int
}

func (b *countingBackend) Add(dst, x, y compute.Tensor, rows int) {
	b.adds++
	b.Backend.Add(dst, x, y, rows)
}

func (b *countingBackend) Sync() error {
	b.syncs++
	return b.Backend.Sync()
}

// warmingBackend is a compute.Warmer: it counts its Warm calls and returns err.
type warmingBackend struct {
	*countingBackend
	warms int
	err   error
}

func (b *warmingBackend) Warm() error {
	b.warms++
	return b.err
}

// TestWarmUsesTheBackendsWarm: Model.Warm hands the idle tick to a backend that is a
// compute.Warmer, error included, and runs its own 16-byte kernel (an Add, then a Sync) on one
// that is not.
func TestWarmUsesTheBackendsWarm(t *testing.T) {
	o := enginetest.Read(t, "llama")

	plain := &countingBackend{Backend: openCPU(t)}
	m := enginetest.Load(t, plain, o.Model, engine.Options{MaxRows: 4})
	adds, syncs := plain.adds, plain.syncs
	if err := m.Warm(); err != nil {
		t.Fatal(err)
	}
	if plain.adds != adds+1 || plain.syncs != syncs+1 {
		t.Fatalf("plain backend: Warm made %d Adds and %d Syncs, want 1 and 1", plain.adds-adds, plain.syncs-syncs)
	}

	warming := &warmingBackend{countingBackend: &countingBackend{Backend: openCPU(t)}}
	m = enginetest.Load(t, warming, o.Model, engine.Options{MaxRows: 4})
	adds, syncs = warming.adds, warming.syncs
	if err := m.Warm(); err != nil || warming.warms != 1 {
		t.Fatalf("Warm = %v with %d backend Warms, want nil and 1", err, warming.warms)
	}
	if warming.adds != adds || warming.syncs != syncs {
		t.Fatalf("a Warmer backend also got %d Adds and %d Syncs", warming.adds-adds, warming.syncs-syncs)
	}
	warming.err = errors.New("the tick failed")
	if err := m.Warm(); !errors.Is(err, warming.err) {
		t.Fatalf("Warm = %v, want the backend's error", err)
	}
}
