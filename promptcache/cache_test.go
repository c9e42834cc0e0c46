package promptcache

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// fakeStore keeps blocks as bytes and sessions as one int32 of "state" a position, so that a test
// can see which state a restore put where.
type fakeStore struct {
	blocks   [][]byte
	sessions map[int][]int32 // by base
}

func newFakeStore(blocks int) *fakeStore {
	s := &fakeStore{sessions: map[int][]int32{}}
	s.Resize(blocks, nil)
	return s
}

func (s *fakeStore) Blocks() int     { return len(s.blocks) }
func (s *fakeStore) BlockBytes() int { return 4 * BlockTokens }

func (s *fakeStore) session(base int) []int32 {
	if s.sessions[base] == nil {
		s.sessions[base] = make([]int32, 16*BlockTokens)
	}
	return s.sessions[base]
}

func (s *fakeStore) Save(block, base, pos int) error {
	for i, v := range s.session(base)[pos : pos+BlockTokens] {
		binary.LittleEndian.PutUint32(s.blocks[block][4*i:], uint32(v))
	}
	return nil
}

func (s *fakeStore) Restore(base, pos, block int) error {
	sess := s.session(base)
	for i := range BlockTokens {
		sess[pos+i] = int32(binary.LittleEndian.Uint32(s.blocks[block][4*i:]))
	}
	return nil
}

func (s *fakeStore) Read(block int, dst []byte) error { copy(dst, s.blocks[block]); return nil }
func (s *fakeStore) Write(block int, src []byte) error {
	copy(s.blocks[block], src)
	return nil
}

func (s *fakeStore) Resize(blocks int, keep []int) error {
	next := make([][]byte, blocks)
	for i := range next {
		next[i] = make([]byte, s.BlockBytes())
		if i < len(keep) {
			copy(next[i], s.blocks[keep[i]])
		}
	}
	s.blocks = next
	return nil
}

func (s *fakeStore) Close() {}

// fakeSpill is a spill folder in a map.
type fakeSpill map[Key][]byte

func (f fakeSpill) Has(k Key) bool                            { return f[k] != nil }
func (f fakeSpill) Put(k Key, tokens []int32, payload []byte) { f[k] = payload }
func (f fakeSpill) PutWait(ctx context.Context, k Key, tokens []int32, payload []byte) error {
	f[k] = payload
	return ctx.Err()
}
func (f fakeSpill) Get(k Key, tokens []int32) ([]byte, error) {
	if f[k] == nil {
		return nil, errors.New("not here")
	}
	return f[k], nil
}

// prompt returns n tokens that start with the shared tokens and then differ by salt.
func prompt(shared, n int, salt int32) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(i)
		if i >= shared {
			p[i] = 1000*salt + int32(i)
		}
	}
	return p
}

// prefill writes the "state" of tokens into the session at base: position p's state is a
// function of the whole prefix, as a model's keys and values are.
func prefill(s *fakeStore, base int, tokens []int32) {
	sess, h := s.session(base), int32(7)
	for i, t := range tokens {
		h = h*31 + t
		sess[i] = h
	}
}

func TestOfferRestore(t *testing.T) {
	s := newFakeStore(8)
	c := New(s, Options{Identity: "m"})
	p := prompt(200, 200, 0)
	prefill(s, 0, p)
	c.Offer(p, nil, 0, len(p))
	if got := c.Stats().Blocks; got != 3 {
		t.Fatalf("%d blocks after offering 200 tokens, want 3", got)
	}
	q := append(slices.Clone(p[:192]), 5, 6, 7)
	m := c.Lookup(c.Keys(q))
	if m.Memory != 3 {
		t.Fatalf("lookup found %d blocks in memory, want 3", m.Memory)
	}
	if got := c.Restore(m, 1024, 0); got != 192 {
		t.Fatalf("restore reached %d, want 192", got)
	}
	if !slices.Equal(s.session(1024)[:192], s.session(0)[:192]) {
		t.Fatal("the restored state differs from the offered one")
	}
	st := c.Stats()
	if st.Hits != 1 || st.TokensReused != 192 {
		t.Fatalf("stats %+v, want 1 hit of 192 tokens", st)
	}
	// A prompt that differs inside the first block finds nothing.
	r := slices.Clone(q)
	r[3] = 99
	if m := c.Lookup(c.Keys(r)); m.Memory != 0 {
		t.Fatalf("a prompt differing at token 3 matched %d blocks", m.Memory)
	}
	// Another identity finds nothing either.
	if m := New(s, Options{Identity: "other"}).Lookup(Keys("other", q)); m.Memory != 0 {
		t.Fatal("another model's cache found this one's blocks")
	}
}

func TestEvictionSpillsLeastRecentlyUsed(t *testing.T) {
	s := newFakeStore(2)
	spill := fakeSpill{}
	c := New(s, Options{Identity: "m", Spill: spill})
	var prompts [][]int32
	for i := range 3 {
		p := prompt(0, BlockTokens, int32(i+1))
		prompts = append(prompts, p)
		prefill(s, 0, p)
		c.Offer(p, nil, 0, len(p))
		if i == 1 {
			c.Restore(c.Lookup(c.Keys(prompts[0])), 2048, 0) // a use: prompt 1 is now the oldest
		}
	}
	in := func(p []int32) bool { return c.Lookup(c.Keys(p)).Memory == 1 }
	if !in(prompts[0]) || in(prompts[1]) || !in(prompts[2]) {
		t.Fatalf("in memory: %v %v %v; want the used first and the newest kept", in(prompts[0]), in(prompts[1]), in(prompts[2]))
	}
	m := c.Lookup(c.Keys(prompts[1]))
	if m.Disk != 1 || c.Stats().Evictions != 1 || c.Stats().SpillWrites != 1 {
		t.Fatalf("match %+v, stats %+v: want the evicted block on disk", m, c.Stats())
	}
	// Read back, it restores the state it had.
	if n := c.Put(c.Fetcher(m, prompts[1], 4)()); n != 1 {
		t.Fatalf("put %d blocks back, want 1", n)
	}
	m = c.Lookup(c.Keys(prompts[1]))
	c.Restore(m, 4096, 0)
	prefill(s, 8192, prompts[1])
	if !slices.Equal(s.session(4096)[:BlockTokens], s.session(8192)[:BlockTokens]) {
		t.Fatal("a block read back from the spill folder restores other state")
	}
}

func TestPinnedBlocksStay(t *testing.T) {
	s := newFakeStore(1)
	c := New(s, Options{Identity: "m"})
	a, b := prompt(0, BlockTokens, 1), prompt(0, BlockTokens, 2)
	prefill(s, 0, a)
	c.Offer(a, nil, 0, len(a))
	m := c.Lookup(c.Keys(a))
	c.Pin(m)
	c.Offer(b, nil, 0, len(b))
	if c.Lookup(c.Keys(a)).Memory != 1 || c.Lookup(c.Keys(b)).Memory != 0 {
		t.Fatal("a pinned block was evicted")
	}
	c.Unpin(m)
	c.Offer(b, nil, 0, len(b))
	if c.Lookup(c.Keys(b)).Memory != 1 {
		t.Fatal("an unpinned block was not evicted for a new one")
	}
}

func TestResizeKeepsTheMostRecent(t *testing.T) {
	s := newFakeStore(4)
	c := New(s, Options{Identity: "m"})
	var prompts [][]int32
	for i := range 4 {
		p := prompt(0, BlockTokens, int32(i+1))
		prompts = append(prompts, p)
		prefill(s, 64*BlockTokens*(i+1), p)
		c.Offer(p, nil, 64*BlockTokens*(i+1), len(p))
	}
	if err := c.Resize(2); err != nil {
		t.Fatal(err)
	}
	for i, p := range prompts {
		m := c.Lookup(c.Keys(p))
		if want := i >= 2; (m.Memory == 1) != want {
			t.Fatalf("prompt %d in memory %v after shrinking to 2, want %v", i, m.Memory == 1, want)
		}
		if m.Memory == 1 {
			c.Restore(m, 0, 0)
			if !slices.Equal(s.session(0)[:BlockTokens], s.session(64 * BlockTokens * (i + 1))[:BlockTokens]) {
				t.Fatalf("prompt %d restores other state after the resize", i)
			}
		}
	}
	if err := c.Resize(6); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Capacity != 6 || st.Blocks != 2 || c.Free() != 6 {
		t.Fatalf("after growing: %+v, free %d", st, c.Free())
	}
}

func TestKeysChain(t *testing.T) {
	p := prompt(0, 3*BlockTokens+5, 0)
	k := Keys("m", p)
	if len(k) != 3 {
		t.Fatalf("%d keys for 3 whole blocks", len(k))
	}
	q := slices.Clone(p)
	q[BlockTokens+1]++
	kq := Keys("m", q)
	if kq[0] != k[0] || kq[1] == k[1] || kq[2] == k[2] {
		t.Fatal("a change in block 1 must change the keys of blocks 1 and 2 and only those")
	}
	if fmt.Sprint(Keys("n", p)[0]) == fmt.Sprint(k[0]) {
		t.Fatal("the identity must seed the keys")
	}
}

// TestAppendKeys: keys appended block by block as a sequence grows are the keys of the whole.
func TestAppendKeys(t *testing.T) {
	p := prompt(0, 5*BlockTokens+7, 0)
	var k []Key
	for n := 0; n <= len(p); n += 37 {
		k = appendKeys("m", k, p[:n])
	}
	k = appendKeys("m", k, p)
	if want := Keys("m", p); !slices.Equal(k, want) {
		t.Fatalf("appended keys %v, the whole's %v", k, want)
	}
}
