//go:build amd64 || arm64

package cuda

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"tfd/engine"
	"tfd/engine/enginetest"
)

// childMode is how a test of this file runs when it is the child of itself: "" in the parent.
func childMode() string { return os.Getenv("TFD_SIGNALS_CHILD") }

// runChild runs test name alone in a child process of this binary, in mode, and returns its output
// and how it ended: a child that dies of a signal is a failure there and not the end of this run.
func runChild(t *testing.T, name, mode string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v")
	cmd.Env = append(os.Environ(), "TFD_SIGNALS_CHILD="+mode)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestSigactionsPutBack checks restoreSigactions on the action a library of the CUDA backend was
// seen to leave for SIGTERM: Go's handler without SA_ONSTACK. The control, a child that changes
// SIGTERM's action so behind Go's back, dies of the signal with Go's complaint about the flag;
// the child that puts the saved actions back first lives and gets SIGTERM through os/signal.
func TestSigactionsPutBack(t *testing.T) {
	if mode := childMode(); mode != "" {
		kind, fix := strings.CutSuffix(mode, ",fixed")
		termAfterChange(t, kind, fix)
		return
	}
	out, err := runChild(t, "TestSigactionsPutBack", "stripped")
	if err == nil || !strings.Contains(out, "SA_ONSTACK") {
		t.Errorf("control: SIGTERM on Go's handler without SA_ONSTACK should have killed the child with Go's complaint about it; it ended %v:\n%s", err, out)
	}
	if out, err := runChild(t, "TestSigactionsPutBack", "stripped,fixed"); err != nil {
		t.Errorf("SIGTERM after restoreSigactions: %v\n%s", err, out)
	}
}

// TestGoSignalChangesStand checks that restoreSigactions leaves the actions Go itself changes
// alone: SIGUSR2 ignored, then asked for through os/signal again.
func TestGoSignalChangesStand(t *testing.T) {
	saved := readSigactions()
	defer signal.Reset(unix.SIGUSR2)
	signal.Ignore(unix.SIGUSR2)
	if changed, _ := restoreSigactions(saved); len(changed) > 0 {
		t.Fatalf("restoreSigactions put back %v after signal.Ignore", changed)
	}
	saved = readSigactions() // SIGUSR2 ignored
	c := make(chan os.Signal, 1)
	signal.Notify(c, unix.SIGUSR2)
	defer signal.Stop(c)
	if changed, _ := restoreSigactions(saved); len(changed) > 0 {
		t.Fatalf("restoreSigactions put back %v after signal.Notify", changed)
	}
}

// termAfterChange is TestSigactionsPutBack's child: it asks os/signal for SIGTERM, saves every
// action, changes SIGTERM's as kind says, puts the saved actions back where fix says so, and
// sends SIGTERM to its own thread.
func termAfterChange(t *testing.T, kind string, fix bool) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, unix.SIGTERM)
	defer signal.Stop(c)
	saved := readSigactions()
	sa := saved[unix.SIGTERM]
	if sa.handler <= 1 || sa.flags&saOnStack == 0 {
		t.Fatalf("SIGTERM's action is not Go's handler on the alternate stack: %+v", sa)
	}
	if kind != "stripped" {
		t.Fatalf("unknown change %q", kind)
	}
	sa.flags &^= saOnStack
	if err := rtSigaction(unix.SIGTERM, &sa, nil); err != nil {
		t.Fatal(err)
	}
	if fix {
		if changed, _ := restoreSigactions(saved); !slices.Equal(changed, []unix.Signal{unix.SIGTERM}) {
			t.Fatalf("restoreSigactions put back %v, want SIGTERM alone", changed)
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Tgkill(os.Getpid(), unix.Gettid(), unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c)
}

// TestSIGTERMWithTheBackendOpen sends SIGTERM, which the process has asked Go to deliver (as tfd
// serve does, to drain its requests when systemd stops it), to every thread of a process that has
// opened the CUDA backend and decoded with it, the driver's own threads included, and checks that
// the process lives and gets it. On the H200 the child died on the worker's thread, "signal 15
// received but handler not on signal stack", and with SA_ONSTACK added to the handlers that
// lacked it, of the signal itself, until the backend put Go's handlers back.
func TestSIGTERMWithTheBackendOpen(t *testing.T) {
	if childMode() == "backend" {
		termEveryThread(t)
		return
	}
	openCUDA(t) // skips where there is no GPU
	out, err := runChild(t, "TestSIGTERMWithTheBackendOpen", "backend")
	t.Logf("child:\n%s", out)
	if err != nil {
		t.Fatalf("a process with the CUDA backend open did not live through SIGTERM sent to each of its threads: %v", err)
	}
}

// termEveryThread is TestSIGTERMWithTheBackendOpen's child: open, load the bundled model and
// decode a few tokens greedily (graphs captured and replayed, as a served model's are), then
// SIGTERM to each thread.
func termEveryThread(t *testing.T) {
	slog.SetLogLoggerLevel(slog.LevelDebug) // the line naming the handlers put back
	m := enginetest.Load(t, openCUDA(t), bundledDir, engine.Options{MaxRows: 8})
	enginetest.Greedy(t, m, []int32{1, 2, 3}, 6)
	logChangedSigactions(t)
	// No signal.Stop: the first SIGTERM ends the wait while others may still be on their way (a
	// thread that has signals blocked for a moment gets its own late), and one that comes after
	// Stop gets the default action, which kills the process: of three GPU runs with Go's handlers
	// put back, one died so ("signal: terminated"), one failed with its output not kept, one
	// passed. The process ends with the test, still asking for SIGTERM.
	c := make(chan os.Signal, 1)
	signal.Notify(c, unix.SIGTERM)
	tids, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range tids {
		tid, _ := strconv.Atoi(d.Name())
		comm, _ := os.ReadFile(filepath.Join("/proc/self/task", d.Name(), "comm"))
		t.Logf("thread %d %s", tid, bytes.TrimSpace(comm))
		if err := unix.Tgkill(os.Getpid(), tid, unix.SIGTERM); err != nil && err != unix.ESRCH {
			t.Fatalf("tgkill %d: %v", tid, err)
		}
	}
	waitFor(t, c)
}

// waitFor waits for a signal on c, with a guard against a lost one hanging the run (not a measure
// of time).
func waitFor(t *testing.T, c <-chan os.Signal) {
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatal("no SIGTERM reached Go in 10 s")
	}
}

// logChangedSigactions logs every signal whose action differs from the one before libcuda
// loaded, and where its handler lives: what a library changed since the last Sync.
func logChangedSigactions(t *testing.T) {
	now := readSigactions()
	for sig := unix.Signal(1); sig <= 64; sig++ {
		if now[sig] != goHandlers[sig] {
			t.Logf("%s: %+v, handler in %s (before libcuda: %+v)", unix.SignalName(sig), now[sig], mappedFile(now[sig].handler), goHandlers[sig])
		}
	}
}

// TestMappedFileNamesTheBinary checks the debug line's pointer to where a handler lives: Go's
// own handler is in this test binary, SIG_DFL and SIG_IGN are named, and an address of no
// mapping says so.
func TestMappedFileNamesTheBinary(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mappedFile(readSigactions()[unix.SIGURG].handler), filepath.Base(exe); got != want {
		t.Errorf("Go's SIGURG handler is in %q, want %q", got, want)
	}
	if got := mappedFile(0) + " " + mappedFile(1); got != "SIG_DFL SIG_IGN" {
		t.Errorf("mappedFile of 0 and 1: %q", got)
	}
	if got := mappedFile(16); !strings.Contains(got, "in no mapping") {
		t.Errorf("mappedFile(16) = %q, want an address in no mapping", got)
	}
}
