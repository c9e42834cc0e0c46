package metal

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"tfd/compute"
)

// defaultTick is the idle tick's period when compute.ResidencyOptions.Tick is 0: macOS takes idle GPU
// memory back after about a second, and half of that keeps ahead of it.
const defaultTick = 500 * time.Millisecond

// setCapacity is the initial capacity asked of the residency set. It is only a hint to Metal (the
// set grows); a model's weights, KV pool and scratch come to some hundreds of buffers.
const setCapacity = 1024

// keeper holds every buffer the Metal backend makes in one MTLResidencySet, whole or not at all,
// and runs the idle tick that keeps the GPU's memory wired between requests (DESIGN.md,
// "Residency and keepalive").
//
// Life: the backend makes the keeper before it loads anything, tracks each buffer as it makes it
// and untracks each as it frees it, calls loaded once the model is in place, beforeWork before
// each command buffer of real work and afterWork once it has waited for it, idle on the
// scheduler's idle tick, and close when it closes.
//
// Commit points. During load, buffers join the set at once and loaded commits them all together.
// After load, a buffer made or freed is only staged (Metal applies adds and removes at commit),
// and the staged changes are committed at the next commit point: the idle tick, or the start of
// the next request (beforeWork after the device has been idle). A commit costs a trip through the
// driver, so a request that makes and frees buffers pays for none of them; and a freed buffer is
// released only after the commit that took it out of the set, so the set never holds a buffer
// that is gone.
//
// Whole or none. A set that leaves buffers out makes rounds erratic (each round waits on whatever
// the OS took back), so the set holds every live buffer or none. The bound is
// compute.ResidencyOptions.Limit (when not 0), never above the device's recommendedMaxWorkingSetSize. If
// the buffers at load pass it, there is no set at all and one warning says by how much and which
// setting brings them under. If they pass it later (the buffers staged since the last commit
// would take the set over), the commit point turns the set off for good instead of committing:
// every buffer is removed, the removal committed, residency ended, and one warning names the
// numbers. It stays off until the backend is closed and a new keeper is made (a reload), because
// going back and forth would make the first request after each change pay for the OS's choices
// again.
//
// Every method is safe for concurrent use (stats is read by /metrics while the backend's goroutine
// works); the backend still calls the others from its one goroutine, in the order above.
type keeper struct {
	g    gpu
	opts compute.ResidencyOptions // Tick set to defaultTick when 0
	log  *slog.Logger

	mu        sync.Mutex   // guards every field below
	set       residencySet // nil: no set (disabled, none on this macOS, turned off, closed)
	setErr    error        // why newKeeper has no set although residency is enabled
	isLoaded  bool         // loaded has run
	requested bool         // requestResidency was called and endResidency not yet

	live     map[allocation]member // the buffers in the set, committed or staged
	bytes    uint64                // the sizes of live, summed
	staged   int                   // adds and removes waiting for a commit; 0: nothing to commit
	releases []func()              // releases of removed buffers, waiting for a commit

	lastWork time.Time              // when beforeWork or afterWork last ran
	idled    bool                   // an idle tick ran since the last beforeWork
	counts   compute.ResidencyStats // what stats returns
}

// member is a live buffer in the set. It is in the set as committed once a commit followed its
// add: when counts.Commits has passed epoch.
type member struct {
	size  uint64
	epoch uint64 // counts.Commits when it was added
}

// newKeeper returns the keeper of g's buffers under opts; logger (nil: slog.Default()) gets its
// one-line reports. With opts.Enabled it makes the residency set at once, so that buffers made
// during load join it as they come; where g has none, loaded says so.
func newKeeper(g gpu, opts compute.ResidencyOptions, logger *slog.Logger) *keeper {
	if opts.Tick <= 0 {
		opts.Tick = defaultTick
	}
	if logger == nil {
		logger = slog.Default()
	}
	k := &keeper{g: g, opts: opts, log: logger}
	if opts.Enabled {
		k.set, k.setErr = g.newResidencySet(setCapacity)
		if k.setErr != nil {
			k.set = nil
		}
		k.live = make(map[allocation]member)
	}
	return k
}

// track registers a buffer just made; a must be comparable (a pointer or an Objective-C ID) and
// not tracked already. During load it joins the set at once (uncommitted); after loaded, it is
// staged (added without a commit) until the next commit point. Without a set it does nothing.
func (k *keeper) track(a allocation) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.set == nil {
		return
	}
	if _, dup := k.live[a]; dup {
		panic("metal: a buffer tracked twice by the residency keeper")
	}
	k.live[a] = member{size: a.size(), epoch: k.counts.Commits}
	k.bytes += a.size()
	k.set.add(a)
	k.staged++
}

// untrack takes a buffer out: it leaves the set before it is released. release (nil: nothing to
// do) runs only after a commit that removed the buffer, at the next commit point, or at once if
// there is no set or the buffer never was in the set as committed (it was added after the last
// commit, or never tracked). release runs on the caller's goroutine, without the keeper's lock.
func (k *keeper) untrack(a allocation, release func()) {
	k.mu.Lock()
	m, ok := k.live[a]
	if !ok {
		k.mu.Unlock()
		run(release)
		return
	}
	delete(k.live, a)
	k.bytes -= m.size
	k.set.remove(a)
	if m.epoch < k.counts.Commits { // committed: the buffer stays in use by the set until a commit
		k.staged++
		if release != nil {
			k.releases = append(k.releases, release)
		}
		k.mu.Unlock()
		return
	}
	k.staged-- // cancels its own staged add: nothing left to commit for it
	k.mu.Unlock()
	run(release)
}

// loaded ends the load, whole or none. If every tracked buffer together fits the bound (opts.Limit
// when not 0, never above g.workingSetLimit()), it commits the set, requests residency and logs
// "N buffers (X GiB) held resident"; otherwise it uses no set at all and logs one warning with the
// numbers and the settings that bring them under. With opts.Enabled false it logs one line saying
// there is no set, and where the gpu has no residency sets, one line saying they need macOS 15.
// Only the first call does anything.
func (k *keeper) loaded() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.isLoaded {
		return
	}
	k.isLoaded = true
	switch {
	case !k.opts.Enabled:
		k.log.Info("metal: residency.enabled is false: no residency set, so macOS may take idle " +
			"GPU memory back and the first request after a pause waits for it")
		return
	case errors.Is(k.setErr, errNoResidencySets):
		k.log.Warn("metal: no residency set: they need macOS 15 or later, so on this macOS the " +
			"first request after a pause may wait for GPU memory")
		return
	case k.setErr != nil:
		k.log.Warn("metal: no residency set: " + k.setErr.Error())
		return
	}
	if bound, byLimit := k.bound(); k.bytes > bound {
		n, need := len(k.live), k.bytes
		k.turnOffLocked() // nothing was committed: nothing to run
		k.log.Warn(fmt.Sprintf("metal: no residency set: %d buffers need %s, %s over the %s bound; "+
			"whole or none, so none is held resident and the first request after a pause may wait "+
			"for GPU memory: %s", n, gib(need), gib(need-bound), gib(bound), k.advice(byLimit)))
		return
	}
	k.commitLocked()
	k.set.requestResidency()
	k.requested = true
	k.counts.On = true
	k.log.Info(fmt.Sprintf("metal: %d buffers (%s) held resident", len(k.live), gib(k.bytes)))
}

// beforeWork is called before each command buffer of real work is encoded (not the idle tick's).
// If the device has been idle, that is an idle tick ran since the last work or no work ran for at
// least opts.Tick (since the last afterWork), this is a request's start, or a request resuming
// after a pause, and so a commit point: staged changes are committed first. Within a request
// (work after work, closer than opts.Tick) nothing is committed, and with nothing staged there is
// no commit.
func (k *keeper) beforeWork() {
	now := time.Now()
	k.mu.Lock()
	var releases []func()
	if k.idled || now.Sub(k.lastWork) >= k.opts.Tick {
		releases = k.commitPointLocked()
	}
	k.lastWork, k.idled = now, false
	k.mu.Unlock()
	runAll(releases)
}

// afterWork is called when the host has waited for the work that beforeWork announced (the
// command buffer completed or failed): from then on the device is idle until the next beforeWork.
// Without it the idle gap would run from the last beforeWork, and a command buffer longer than
// opts.Tick would make the next one a commit point in the middle of a request.
func (k *keeper) afterWork() {
	now := time.Now()
	k.mu.Lock()
	k.lastWork = now
	k.mu.Unlock()
}

// idle is the idle tick: the scheduler's lane calls it through the model's Warm while idle within
// keep_warm, every residency.tick. It commits staged changes (a commit point), requests residency
// again (llama.cpp's keep-alive re-requests it every 500 ms too; the call costs little), and then
// runs g.tick, real GPU work that waits for the GPU. It returns tick's error; a failed tick is not
// counted in compute.ResidencyStats.Ticks.
func (k *keeper) idle() error {
	k.mu.Lock()
	releases := k.commitPointLocked()
	if k.requested {
		k.set.requestResidency()
	}
	k.idled = true
	k.mu.Unlock()
	runAll(releases)
	if err := k.g.tick(); err != nil {
		return fmt.Errorf("metal: idle tick: %w", err)
	}
	k.mu.Lock()
	k.counts.Ticks++
	k.mu.Unlock()
	return nil
}

// close ends residency and forgets the set: every buffer leaves it, the removal is committed (so
// the releases waiting for a commit run, and the set holds nothing whatever order the backend
// frees the rest in), and endResidency follows if residency was requested. Afterwards track does
// nothing and untrack releases at once. Detaching the set from the command queue and releasing it
// is the backend's.
func (k *keeper) close() {
	k.mu.Lock()
	var releases []func()
	if k.set != nil {
		releases = k.turnOffLocked()
	}
	k.mu.Unlock()
	runAll(releases)
}

// stats returns what /metrics shows.
func (k *keeper) stats() compute.ResidencyStats {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.counts
}

// commitPointLocked commits the staged changes of a loaded set, if any, or turns the set off if
// they would take it over the bound. It returns the releases the commit allows.
func (k *keeper) commitPointLocked() []func() {
	if k.set == nil || !k.isLoaded || k.staged == 0 {
		return nil
	}
	bound, byLimit := k.bound()
	if k.bytes <= bound {
		return k.commitLocked()
	}
	n, need := len(k.live), k.bytes
	releases := k.turnOffLocked()
	k.log.Warn(fmt.Sprintf("metal: residency set turned off: buffers made since load bring it to "+
		"%d buffers, %s, %s over the %s bound; whole or none, so none is held resident until tfd "+
		"reloads the model: %s", n, gib(need), gib(need-bound), gib(bound), k.advice(byLimit)))
	return releases
}

// commitLocked commits the set and returns the releases that were waiting for it.
func (k *keeper) commitLocked() []func() {
	k.set.commit()
	k.counts.Commits++
	k.staged = 0
	k.counts.ResidentBuffers, k.counts.ResidentBytes = uint64(len(k.live)), k.bytes
	releases := k.releases
	k.releases = nil
	return releases
}

// turnOffLocked takes every buffer out of the set, commits that if the set was ever committed, and
// ends residency; the keeper then has no set. It returns the releases that were waiting.
func (k *keeper) turnOffLocked() []func() {
	for a := range k.live {
		k.set.remove(a)
	}
	clear(k.live)
	k.bytes = 0 // what the commit below holds resident: nothing
	var releases []func()
	if k.counts.Commits > 0 {
		releases = k.commitLocked()
	}
	return append(releases, k.endLocked()...)
}

// endLocked ends residency if it was requested and forgets the set and its buffers. It returns the
// releases still waiting, which no commit will come for any more.
func (k *keeper) endLocked() []func() {
	if k.requested {
		k.set.endResidency()
		k.requested = false
	}
	k.set = nil
	clear(k.live)
	k.bytes, k.staged = 0, 0
	k.counts.On = false
	k.counts.ResidentBuffers, k.counts.ResidentBytes = 0, 0
	releases := k.releases
	k.releases = nil
	return releases
}

// bound returns the most bytes the set may hold: opts.Limit when it is not 0, never above the
// device's working set limit. byLimit reports that the bound is opts.Limit (memory.load_limit_gb).
func (k *keeper) bound() (bound uint64, byLimit bool) {
	ws := k.g.workingSetLimit()
	if k.opts.Limit != 0 && k.opts.Limit < ws {
		return k.opts.Limit, true
	}
	return ws, false
}

// advice says which settings bring the buffers under the bound.
func (k *keeper) advice(byLimit bool) string {
	if byLimit {
		return fmt.Sprintf("use fewer or smaller sessions (sessions.parallel, sessions.layout) or a "+
			"smaller context (model.context), or raise memory.load_limit_gb above %s; "+
			"residency.enabled = false turns the set off and this warning with it", gib(k.opts.Limit))
	}
	return fmt.Sprintf("set memory.load_limit_gb to at most %s (the GPU's working set limit) so "+
		"that the plan fits it, use fewer or smaller sessions (sessions.parallel, sessions.layout) "+
		"or a smaller context (model.context), or raise the GPU's limit with sudo sysctl "+
		"iogpu.wired_limit_mb; residency.enabled = false turns the set off and this warning with it",
		gib(k.g.workingSetLimit()))
}

// gib formats a byte count in GiB with one decimal.
func gib(n uint64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }

func run(release func()) {
	if release != nil {
		release()
	}
}

func runAll(releases []func()) {
	for _, release := range releases {
		release()
	}
}
