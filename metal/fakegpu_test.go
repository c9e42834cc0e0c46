package metal

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"

	"tfd/compute"
)

// fakeBuf is a buffer of the fake device.
type fakeBuf struct {
	name string
	n    uint64
}

func (b *fakeBuf) size() uint64 { return b.n }

func buf(name string, n uint64) *fakeBuf { return &fakeBuf{name, n} }

const gb = 1 << 30

// fakeGPU stands in for a Metal device and its queue. Its residency set applies adds and removes
// at commit, as Metal does, so a test can ask what the set holds as committed; and it records
// every call, and every misuse Metal would not forgive (a buffer released while the committed set
// still holds it, a commit after endResidency), as a violation.
type fakeGPU struct {
	mu         sync.Mutex // guards every field below, and the set's
	limit      uint64     // workingSetLimit
	setErr     error      // what newResidencySet returns instead of a set
	tickErr    error      // what tick returns
	set        *fakeSet   // the set made, or nil
	sets       int        // newResidencySet calls
	ticks      int        // tick calls
	released   []string   // names of released buffers, in order
	violations []string
}

func newFakeGPU(limit uint64) *fakeGPU { return &fakeGPU{limit: limit} }

func (g *fakeGPU) newResidencySet(capacity int) (residencySet, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sets++
	if g.setErr != nil {
		return nil, g.setErr
	}
	g.set = &fakeSet{g: g, staged: map[allocation]bool{}, committed: map[allocation]bool{}}
	return g.set, nil
}

func (g *fakeGPU) workingSetLimit() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.limit
}

func (g *fakeGPU) tick() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ticks++
	return g.tickErr
}

func (g *fakeGPU) violate(format string, args ...any) {
	g.violations = append(g.violations, fmt.Sprintf(format, args...))
}

// release returns the release func of b: it checks that the committed set no longer holds b.
func (g *fakeGPU) release(b *fakeBuf) func() {
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if slices.Contains(g.released, b.name) {
			g.violate("%s released twice", b.name)
		}
		if g.set != nil && g.set.committed[b] {
			g.violate("%s released while the committed set holds it", b.name)
		}
		g.released = append(g.released, b.name)
	}
}

// fakeSet is the fake device's MTLResidencySet.
type fakeSet struct {
	g         *fakeGPU
	staged    map[allocation]bool // what the set holds with its staged changes applied
	committed map[allocation]bool // what it holds as last committed
	adds      int
	removes   int
	commits   int
	requests  int
	ends      int
}

func (s *fakeSet) add(a allocation) {
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	if s.staged[a] {
		s.g.violate("%s added twice", a.(*fakeBuf).name)
	}
	s.staged[a] = true
	s.adds++
}

func (s *fakeSet) remove(a allocation) {
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	if !s.staged[a] {
		s.g.violate("%s removed but not in the set", a.(*fakeBuf).name)
	}
	delete(s.staged, a)
	s.removes++
}

func (s *fakeSet) commit() {
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	if s.ends > 0 {
		s.g.violate("commit after endResidency")
	}
	s.committed = maps.Clone(s.staged)
	s.commits++
}

func (s *fakeSet) requestResidency() {
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	s.requests++
}

func (s *fakeSet) endResidency() {
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	s.ends++
}

// setState is a snapshot of the fake set: its counts and the names it holds as committed.
type setState struct {
	adds, removes, commits, requests, ends int
	committed                              []string // sorted
}

func (g *fakeGPU) state() setState {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.set
	if s == nil {
		return setState{}
	}
	st := setState{adds: s.adds, removes: s.removes, commits: s.commits, requests: s.requests, ends: s.ends}
	for a := range s.committed {
		st.committed = append(st.committed, a.(*fakeBuf).name)
	}
	slices.Sort(st.committed)
	return st
}

func (g *fakeGPU) tickCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ticks
}

func (g *fakeGPU) releasedNames() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.released)
}

// check fails the test on any misuse the fake saw.
func (g *fakeGPU) check(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, v := range g.violations {
		t.Errorf("metal misuse: %s", v)
	}
}

// logBuffer collects a keeper's log lines.
type logBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// lines returns the lines logged so far.
func (l *logBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := bytes.TrimSuffix(l.buf.Bytes(), []byte("\n"))
	if len(s) == 0 {
		return nil
	}
	var lines []string
	for line := range bytes.SplitSeq(s, []byte("\n")) {
		lines = append(lines, string(line))
	}
	return lines
}

// newLogged returns a keeper of g whose log lines land in the returned buffer.
func newLogged(g *fakeGPU, opts compute.ResidencyOptions) (*keeper, *logBuffer) {
	var lb logBuffer
	return newKeeper(g, opts, slog.New(slog.NewTextHandler(&lb, nil))), &lb
}
