package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"tfd/compute"
)

// noDevice is a driver whose device this machine lacks, as metal's on Linux.
type noDevice string

func (d noDevice) Open() (compute.Backend, error) {
	return nil, fmt.Errorf("%s: %w: %s", string(d), compute.ErrNoDevice, "not on this machine")
}

// fakeMetal stands for the metal driver in the daemon's tests: no device, unless a test sets
// open (and puts it back).
type fakeMetal struct {
	open atomic.Pointer[func() (compute.Backend, error)]
}

func (f *fakeMetal) Open() (compute.Backend, error) {
	if open := f.open.Load(); open != nil {
		return (*open)()
	}
	return noDevice("metal").Open()
}

var metalDriver = &fakeMetal{}

func init() {
	// The daemon's tests import only the cpu backend; these stand for the GPUs auto tries first.
	compute.Register("metal", metalDriver)
	compute.Register("cuda", noDevice("cuda"))
}

// TestAutoSaysWhyItFellBack: auto tries the GPUs first and, serving on the CPU, says in one log
// line why it passed each over.
func TestAutoSaysWhyItFellBack(t *testing.T) {
	var log bytes.Buffer
	b, err := OpenBackend("auto", slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Name() != "cpu" {
		t.Fatalf("auto opened %s, want cpu", b.Name())
	}
	line := strings.TrimSpace(log.String())
	if strings.Count(line, "\n") != 0 || !strings.Contains(line, "serving on cpu") ||
		!strings.Contains(line, "metal: compute: no such device") || !strings.Contains(line, "cuda: compute: no such device") ||
		strings.Index(line, "metal") > strings.Index(line, "cuda") {
		t.Errorf("log: %q, want one line naming why metal, then cuda, were passed over", line)
	}
	if _, err := OpenBackend("metal", slog.Default()); !errors.Is(err, compute.ErrNoDevice) {
		t.Errorf("model.backend metal here: %v, want ErrNoDevice", err)
	}
}

// resident is the cpu backend dressed as a GPU that shares RAM and holds its memory resident:
// it records the residency options it is given, and whether any tensor came before them.
type resident struct {
	compute.Backend
	mu          sync.Mutex // guards the fields below
	opts        *compute.ResidencyOptions
	tensorFirst bool
}

func (r *resident) Name() string       { return "metal" }
func (r *resident) WorkingSet() uint64 { return 1 << 30 }

func (r *resident) SetResidency(opts compute.ResidencyOptions, _ *slog.Logger) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opts = &opts
	return nil
}

func (r *resident) ResidencyStats() compute.ResidencyStats {
	return compute.ResidencyStats{On: true, ResidentBuffers: 7, ResidentBytes: 12345, Commits: 2, Ticks: 3}
}

func (r *resident) Upload(dtype compute.DType, shape []int, data []byte) (compute.Tensor, error) {
	r.noteTensor()
	return r.Backend.Upload(dtype, shape, data)
}

func (r *resident) Alloc(dtype compute.DType, shape ...int) (compute.Tensor, error) {
	r.noteTensor()
	return r.Backend.Alloc(dtype, shape...)
}

func (r *resident) noteTensor() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.opts == nil {
		r.tensorFirst = true
	}
}

// TestResidencyReachesTheBackend: a backend that holds its memory resident gets the [residency]
// settings and the plan's limit before its first tensor; the plan never passes its working set
// and shows it; /metrics shows what it holds.
func TestResidencyReachesTheBackend(t *testing.T) {
	r := &resident{}
	open := func() (compute.Backend, error) {
		b, err := compute.Open("cpu")
		r.Backend = b
		return r, err
	}
	metalDriver.open.Store(&open)
	defer metalDriver.open.Store(nil)
	d := startDaemon(t, "[model]\nbackend = \"metal\"\n[memory]\nload_limit_gb = 4\nmargin_gb = 0.25\n[residency]\ntick = \"250ms\"\nkeep_warm = \"2m\"\n")
	r.mu.Lock()
	opts, tensorFirst := r.opts, r.tensorFirst
	r.mu.Unlock()
	if opts == nil || tensorFirst {
		t.Fatalf("residency options %v, a tensor before them: %v", opts, tensorFirst)
	}
	if want := (compute.ResidencyOptions{Enabled: true, Tick: 250e6, KeepWarm: 120e9, Limit: 1 << 30}); *opts != want {
		t.Errorf("residency options %+v, want %+v (the limit capped at the working set)", *opts, want)
	}
	if rep := d.status(t); rep.Plan.LimitBytes != 1<<30 || !strings.Contains(rep.Plan.Text, "recommended working set") {
		t.Errorf("plan limit %d, want the working set (1 GiB), shown:\n%s", rep.Plan.LimitBytes, rep.Plan.Text)
	}
	resp, err := http.Get(d.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"tfd_resident_bytes 12345", "tfd_resident_buffers 7", "tfd_residency_commits_total 2", "tfd_residency_ticks_total 3"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
