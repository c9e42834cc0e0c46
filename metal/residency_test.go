package metal

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"tfd/compute"
)

// on is the options of a keeper that holds a set under a bound of limit bytes.
func on(limit uint64) compute.ResidencyOptions {
	return compute.ResidencyOptions{Enabled: true, Tick: 500 * time.Millisecond, KeepWarm: time.Minute, Limit: limit}
}

// loadedKeeper returns a keeper over a fake device with a 64 GiB working set, that has loaded bufs
// under opts.
func loadedKeeper(t *testing.T, opts compute.ResidencyOptions, bufs ...*fakeBuf) (*keeper, *fakeGPU, *logBuffer) {
	t.Helper()
	g := newFakeGPU(64 * gb)
	k, lb := newLogged(g, opts)
	for _, b := range bufs {
		k.track(b)
	}
	k.loaded()
	return k, g, lb
}

func wantState(t *testing.T, g *fakeGPU, commits, requests, ends int, committed ...string) {
	t.Helper()
	st := g.state()
	slices.Sort(committed)
	if st.commits != commits || st.requests != requests || st.ends != ends || !slices.Equal(st.committed, committed) {
		t.Fatalf("set: %d commits, %d requests, %d ends, holding %v; want %d, %d, %d, holding %v",
			st.commits, st.requests, st.ends, st.committed, commits, requests, ends, committed)
	}
}

func wantReleased(t *testing.T, g *fakeGPU, names ...string) {
	t.Helper()
	if got := g.releasedNames(); !slices.Equal(got, names) {
		t.Fatalf("released %v, want %v", got, names)
	}
}

// wantLog demands exactly one log line, at level, containing every one of parts.
func wantLog(t *testing.T, lb *logBuffer, level string, parts ...string) {
	t.Helper()
	lines := lb.lines()
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want 1: %q", len(lines), lines)
	}
	if !strings.Contains(lines[0], "level="+level) {
		t.Errorf("log line %q is not at level %s", lines[0], level)
	}
	for _, p := range parts {
		if !strings.Contains(lines[0], p) {
			t.Errorf("log line %q lacks %q", lines[0], p)
		}
	}
}

// TestLoadHoldsEveryBufferInOneCommit: buffers made during load join the set as they come, and
// loaded commits them all at once, requests residency and says so in one line.
func TestLoadHoldsEveryBufferInOneCommit(t *testing.T) {
	g := newFakeGPU(64 * gb)
	k, lb := newLogged(g, on(48*gb))
	for _, b := range []*fakeBuf{buf("embed", 2*gb), buf("layers", 14*gb), buf("kv", 4*gb)} {
		k.track(b)
	}
	if st := g.state(); st.adds != 3 || st.commits != 0 || st.requests != 0 {
		t.Fatalf("during load: %+v, want 3 adds and no commit or request", st)
	}
	k.loaded()
	wantState(t, g, 1, 1, 0, "embed", "layers", "kv")
	wantLog(t, lb, "INFO", "3 buffers (20.0 GiB) held resident")
	want := compute.ResidencyStats{On: true, ResidentBuffers: 3, ResidentBytes: 20 * gb, Commits: 1}
	if s := k.stats(); s != want {
		t.Fatalf("stats %+v, want %+v", s, want)
	}
	k.loaded() // a second call changes nothing
	wantState(t, g, 1, 1, 0, "embed", "layers", "kv")
	g.check(t)
}

// TestCommitPoints: staged changes are committed before work that starts a request (an idle tick
// ran since the last work, or the device had none for a tick's period), never between the command
// buffers of a request however long they run, and never when nothing is staged.
func TestCommitPoints(t *testing.T) {
	cases := []struct {
		name    string
		work    time.Duration // how long the first command buffer runs
		tick    bool          // run an idle tick after it
		stage   bool          // then make a buffer
		gap     time.Duration // then wait this long before the next work
		commits int           // commits by the end, the one at load included
	}{
		{"within a request", 20 * time.Millisecond, false, true, 10 * time.Millisecond, 1},
		{"after a long command buffer", 2 * time.Second, false, true, time.Millisecond, 1},
		{"a tick's period without work", 20 * time.Millisecond, false, true, 500 * time.Millisecond, 2},
		{"just under a tick's period", 20 * time.Millisecond, false, true, 499 * time.Millisecond, 1},
		{"an idle tick ran", 20 * time.Millisecond, true, true, time.Millisecond, 2},
		{"nothing staged", 20 * time.Millisecond, false, false, time.Hour, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k, g, _ := loadedKeeper(t, on(48*gb), buf("weights", gb))
				k.beforeWork()
				time.Sleep(c.work)
				k.afterWork()
				if c.tick {
					k.idle()
				}
				if c.stage {
					k.track(buf("grown", gb))
				}
				time.Sleep(c.gap)
				k.beforeWork()
				k.afterWork()
				if st := g.state(); st.commits != c.commits {
					t.Fatalf("%d commits, want %d", st.commits, c.commits)
				}
				g.check(t)
			})
		})
	}
}

// TestStagingThroughARequest follows buffers through a request's life: made and freed during the
// request they are only staged (the set as committed keeps what it had, no freed buffer is
// released); the idle tick after commits them all at once and then releases; the next request
// starts with nothing to commit.
func TestStagingThroughARequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		weights, kv, scratch := buf("weights", 8*gb), buf("kv", 2*gb), buf("scratch", gb)
		k, g, _ := loadedKeeper(t, on(48*gb), weights, kv, scratch)
		grown, chains := buf("kv-grown", 4*gb), buf("chains", gb)
		for i := range 40 { // a request: 40 command buffers of 15 ms, 5 ms apart
			k.beforeWork()
			switch i {
			case 3:
				k.track(grown)
			case 7:
				k.untrack(kv, g.release(kv))
				k.untrack(scratch, g.release(scratch))
			case 9:
				k.track(chains)
			}
			time.Sleep(15 * time.Millisecond)
			k.afterWork()
			time.Sleep(5 * time.Millisecond)
		}
		wantState(t, g, 1, 1, 0, "weights", "kv", "scratch")
		wantReleased(t, g)
		if s := k.stats(); s.ResidentBuffers != 3 || s.ResidentBytes != 11*gb {
			t.Fatalf("mid-request stats %+v, want the set as committed at load", s)
		}

		if err := k.idle(); err != nil {
			t.Fatal(err)
		}
		wantState(t, g, 2, 2, 0, "weights", "kv-grown", "chains")
		wantReleased(t, g, "kv", "scratch")
		want := compute.ResidencyStats{On: true, ResidentBuffers: 3, ResidentBytes: 13 * gb, Commits: 2, Ticks: 1}
		if s := k.stats(); s != want {
			t.Fatalf("after the tick: stats %+v, want %+v", s, want)
		}

		k.idle()
		k.beforeWork() // the next request: nothing staged
		wantState(t, g, 2, 3, 0, "weights", "kv-grown", "chains")
		g.check(t)
	})
}

// TestReleaseWaitsForTheRemovingCommit: a freed buffer is released after the commit that took it
// out of the set, and at once where the set never held it as committed.
func TestReleaseWaitsForTheRemovingCommit(t *testing.T) {
	cases := []struct {
		name string
		// free frees b on k, made as the case says, and reports whether the release must wait.
		free func(k *keeper, g *fakeGPU, b *fakeBuf) (waits bool)
	}{
		{"held since load", func(k *keeper, g *fakeGPU, b *fakeBuf) bool {
			k.untrack(b, g.release(b))
			return true
		}},
		{"made after the last commit", func(k *keeper, g *fakeGPU, b *fakeBuf) bool {
			fresh := buf("fresh", gb)
			k.track(fresh)
			k.untrack(fresh, g.release(fresh))
			return false
		}},
		{"made and freed during load", nil},
		{"never tracked", func(k *keeper, g *fakeGPU, b *fakeBuf) bool {
			stranger := buf("stranger", gb)
			k.untrack(stranger, g.release(stranger))
			return false
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newFakeGPU(64 * gb)
			k, _ := newLogged(g, on(48*gb))
			b := buf("b", gb)
			k.track(b)
			waits := false
			if c.free == nil {
				k.untrack(b, g.release(b))
			}
			k.loaded()
			if c.free != nil {
				waits = c.free(k, g, b)
			}
			commits := g.state().commits
			if released := len(g.releasedNames()) == 1; released == waits {
				t.Fatalf("released before a commit: %v, want %v", released, !waits)
			}
			k.idle()
			if len(g.releasedNames()) != 1 {
				t.Fatalf("released %v after the idle tick, want one buffer", g.releasedNames())
			}
			if grew := g.state().commits - commits; grew != b2i(waits) {
				t.Fatalf("the idle tick committed %d times, want %d", grew, b2i(waits))
			}
			g.check(t)
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestWholeOrNoneAtLoad: buffers that pass the bound (memory.load_limit_gb, never above the GPU's
// working set limit) get no set at all and one warning with the numbers and the setting to change;
// buffers that fit are held whole.
func TestWholeOrNoneAtLoad(t *testing.T) {
	cases := []struct {
		name         string
		limit        uint64 // opts.Limit
		workingSet   uint64
		held         bool
		warningParts []string
	}{
		{"under the limit", 48 * gb, 64 * gb, true, nil},
		{"exactly at the bound", 20 * gb, 64 * gb, true, nil},
		{"over the limit", 16 * gb, 64 * gb, false,
			[]string{"3 buffers need 20.0 GiB, 4.0 GiB over the 16.0 GiB bound", "raise memory.load_limit_gb above 16.0 GiB", "sessions.parallel", "residency.enabled"}},
		{"the limit capped at the working set", 48 * gb, 18 * gb, false,
			[]string{"3 buffers need 20.0 GiB, 2.0 GiB over the 18.0 GiB bound", "set memory.load_limit_gb to at most 18.0 GiB", "iogpu.wired_limit_mb", "residency.enabled"}},
		{"no limit: the working set", 0, 18 * gb, false, []string{"2.0 GiB over the 18.0 GiB bound"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newFakeGPU(c.workingSet)
			opts := on(c.limit)
			k, lb := newLogged(g, opts)
			for _, b := range []*fakeBuf{buf("embed", 2*gb), buf("layers", 14*gb), buf("kv", 4*gb)} {
				k.track(b)
			}
			k.loaded()
			if c.held {
				wantState(t, g, 1, 1, 0, "embed", "layers", "kv")
				wantLog(t, lb, "INFO", "held resident")
				return
			}
			wantState(t, g, 0, 0, 0)
			if st := g.state(); st.removes != 3 {
				t.Fatalf("%d buffers taken out of the uncommitted set, want 3", st.removes)
			}
			wantLog(t, lb, "WARN", c.warningParts...)
			if s := k.stats(); s != (compute.ResidencyStats{}) {
				t.Fatalf("stats %+v with no set", s)
			}
			later := buf("later", gb)
			k.track(later)
			k.untrack(later, g.release(later))
			wantReleased(t, g, "later")
			if err := k.idle(); err != nil || g.tickCount() != 1 {
				t.Fatalf("without a set the idle tick still runs: %v, %d ticks", err, g.tickCount())
			}
			if st := g.state(); st.adds != 3 || st.commits != 0 {
				t.Fatalf("the set was touched after load: %+v", st)
			}
			g.check(t)
		})
	}
}

// TestOverTheBoundAfterLoad: buffers staged after load that would take the set over the bound turn
// it off at the commit point, whole: every buffer out, the removal committed, residency ended, one
// warning; the set is not touched again.
func TestOverTheBoundAfterLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kv := buf("kv", 4*gb)
		k, g, lb := loadedKeeper(t, on(20*gb), buf("weights", 14*gb), kv)
		k.beforeWork()
		k.untrack(kv, g.release(kv))
		k.track(buf("kv-grown", 5*gb)) // 19 GiB: fits
		k.idle()
		wantState(t, g, 2, 2, 0, "weights", "kv-grown")
		k.beforeWork()
		big := buf("big", 2*gb)
		k.track(big) // 21 GiB
		wantState(t, g, 2, 2, 0, "weights", "kv-grown")

		k.idle()
		wantState(t, g, 3, 2, 1) // emptied, committed, ended
		wantReleased(t, g, "kv")
		lines := lb.lines()
		if len(lines) != 2 || !strings.Contains(lines[1], "level=WARN") ||
			!strings.Contains(lines[1], "3 buffers, 21.0 GiB, 1.0 GiB over the 20.0 GiB bound") ||
			!strings.Contains(lines[1], "memory.load_limit_gb") {
			t.Fatalf("log %q, want the load line and one warning with the numbers", lines)
		}
		want := compute.ResidencyStats{Commits: 3, Ticks: 2}
		if s := k.stats(); s != want {
			t.Fatalf("stats %+v, want %+v", s, want)
		}

		before := g.state()
		k.untrack(big, g.release(big)) // back under the bound: the set stays off
		k.track(buf("again", gb))
		time.Sleep(time.Second)
		k.beforeWork()
		k.idle()
		k.close()
		wantReleased(t, g, "kv", "big")
		if after := g.state(); after.adds != before.adds || after.removes != before.removes || after.commits != before.commits {
			t.Fatalf("the set was touched after it was turned off: %+v, then %+v", before, after)
		}
		if n := len(lb.lines()); n != 2 {
			t.Fatalf("%d log lines, want the warning once", n)
		}
		g.check(t)
	})
}

// TestNoSet: residency.enabled false, a macOS without residency sets, and a set Metal would not
// make all give no set, one line saying why, buffers released at once, and idle ticks that still
// run.
func TestNoSet(t *testing.T) {
	cases := []struct {
		name    string
		enabled bool
		setErr  error
		sets    int // newResidencySet calls
		level   string
		parts   []string
	}{
		{"disabled", false, nil, 0, "INFO", []string{"residency.enabled is false"}},
		{"no residency sets", true, errNoResidencySets, 1, "WARN", []string{"macOS 15"}},
		{"the set failed", true, errors.New("out of kernel memory"), 1, "WARN", []string{"out of kernel memory"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newFakeGPU(64 * gb)
			g.setErr = c.setErr
			opts := on(48 * gb)
			opts.Enabled = c.enabled
			k, lb := newLogged(g, opts)
			b := buf("weights", gb)
			k.track(b)
			k.loaded()
			wantLog(t, lb, c.level, c.parts...)
			k.untrack(b, g.release(b))
			wantReleased(t, g, "weights")
			if err := k.idle(); err != nil {
				t.Fatal(err)
			}
			if s := k.stats(); g.sets != c.sets || g.set != nil || s != (compute.ResidencyStats{Ticks: 1}) {
				t.Fatalf("%d sets asked, set %v, stats %+v; want %d asked, none made, one tick", g.sets, g.set, s, c.sets)
			}
		})
	}
}

// TestCloseEndsResidency: close empties the set in one commit (so the releases waiting for one
// run, and the rest may be released in any order), ends residency once, and leaves the set alone
// afterwards.
func TestCloseEndsResidency(t *testing.T) {
	weights, kv := buf("weights", 8*gb), buf("kv", 2*gb)
	k, g, _ := loadedKeeper(t, on(48*gb), weights, kv)
	k.untrack(kv, g.release(kv))
	k.close()
	wantState(t, g, 2, 1, 1)
	wantReleased(t, g, "kv")
	if s := k.stats(); s.On || s.ResidentBuffers != 0 || s.ResidentBytes != 0 {
		t.Fatalf("stats %+v after close", s)
	}
	k.untrack(weights, g.release(weights))
	wantReleased(t, g, "kv", "weights")
	k.track(buf("late", gb))
	k.idle()
	k.close()
	if st := g.state(); st.adds != 2 || st.ends != 1 || st.commits != 2 || st.requests != 1 {
		t.Fatalf("the set was touched after close: %+v", st)
	}
	g.check(t)
}

// TestIdleTickFailure: a failed tick's error comes back wrapped, and the tick is not counted.
func TestIdleTickFailure(t *testing.T) {
	k, g, _ := loadedKeeper(t, on(48*gb), buf("weights", gb))
	broken := errors.New("command buffer failed")
	g.tickErr = broken
	if err := k.idle(); !errors.Is(err, broken) || !strings.HasPrefix(err.Error(), "metal: ") {
		t.Fatalf("idle = %v, want the tick's error, wrapped", err)
	}
	if s := k.stats(); s.Ticks != 0 {
		t.Fatalf("a failed tick counted: %+v", s)
	}
	g.tickErr = nil
	if err := k.idle(); err != nil || k.stats().Ticks != 1 {
		t.Fatalf("idle = %v, %d ticks, want one", err, k.stats().Ticks)
	}
}
