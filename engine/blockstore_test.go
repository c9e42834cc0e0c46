package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"tfd/engine"
	"tfd/engine/enginetest"
	"tfd/models"
	"tfd/promptcache"
)

var _ promptcache.Store = (*engine.BlockStore)(nil)

const blockTokens = promptcache.BlockTokens

// TestBlockStoreRestoresExactly: enginetest.CheckBlockStore on the CPU: restored blocks give the
// next step the bits of the session they were saved from.
func TestBlockStoreRestoresExactly(t *testing.T) {
	enginetest.CheckBlockStore(t, openCPU(t))
}

// TestBlockStoreResize: Resize keeps the blocks it is told to, in the order given, and zeroes the
// rest; it can shrink to nothing and grow again; bad arguments are errors that name the numbers,
// and the store is as it was after one.
func TestBlockStoreResize(t *testing.T) {
	m, err := engine.Load(context.Background(), engine.Source{FS: models.FS(), Name: models.Name}, openCPU(t),
		engine.Options{Context: 256, MaxRows: 4, Slots: 768})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	store, err := m.NewBlockStore(4, blockTokens)
	if err != nil {
		t.Fatal(err)
	}
	size := store.BlockBytes()
	if want := 2 * 9 * 2 * 64 * 4 * blockTokens; size != want { // 8 layers and the MTP layer, 2 KV heads of 64
		t.Fatalf("BlockBytes = %d, want %d", size, want)
	}
	r := rand.New(rand.NewPCG(4, 5))
	content := make([][]byte, 4)
	for i := range content {
		content[i] = make([]byte, size)
		for j := range content[i] {
			content[i][j] = byte(r.Uint32())
		}
		if err := store.Write(i, content[i]); err != nil {
			t.Fatal(err)
		}
	}
	zero := make([]byte, size)
	expect := func(what string, want ...[]byte) {
		t.Helper()
		if store.Blocks() != len(want) {
			t.Fatalf("%s: %d blocks, want %d", what, store.Blocks(), len(want))
		}
		got := make([]byte, size)
		for i, w := range want {
			if err := store.Read(i, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, w) {
				t.Errorf("%s: block %d holds other bytes than it should", what, i)
			}
		}
	}
	for _, step := range []struct {
		blocks int
		keep   []int
		want   [][]byte
	}{
		{6, []int{2, 0, 1}, [][]byte{content[2], content[0], content[1], zero, zero, zero}},
		{1, []int{2}, [][]byte{content[1]}},
		{0, nil, nil},
		{2, nil, [][]byte{zero, zero}},
	} {
		if err := store.Resize(step.blocks, step.keep); err != nil {
			t.Fatal(err)
		}
		expect(fmt.Sprintf("after Resize(%d, %v)", step.blocks, step.keep), step.want...)
	}

	for _, tc := range []struct {
		err  error
		want string
	}{
		{store.Resize(3, []int{0, 2}), "keep[1] is block 2 of 2"},
		{store.Resize(1, []int{0, 1}), "resize a block store to 1 blocks: the 2 blocks to keep do not fit"},
		{store.Resize(-1, nil), "to -1 blocks"},
		{store.Save(2, 0, 0), "save block 2 of a block store of 2 blocks"},
		{store.Restore(700, 5, 1), "restore block 1 at positions 5…68 of the session at slot 700: slots 705…768 are outside the KV pool of 768"},
		{store.Save(0, 0, -1), "slots -1…62 are outside"},
		{store.Read(0, make([]byte, size-1)), "a block is"},
		{store.Write(0, make([]byte, size+1)), "a block is"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("error %v, want one saying %q", tc.err, tc.want)
		}
	}
	expect("after the refused calls", zero, zero)
	if err := store.Restore(700, 4, 1); err != nil {
		t.Errorf("restore into the pool's last 64 slots: %v", err)
	}

	m.Close() // closes the store too
	if err := store.Read(0, make([]byte, size)); err == nil || store.Blocks() != 0 {
		t.Errorf("after the model's Close: Read = %v, Blocks = %d; want an error and 0", err, store.Blocks())
	}
}
