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

// TestHandlersOnAltStack checks handlersOnAltStack on Go's own SIGTERM handler stripped of
// SA_ONSTACK, as the CUDA backend's libraries install theirs: SIGTERM to a thread running Go code
// then kills the process (the control, which shows what the test can tell), and with the flag put
// back by handlersOnAltStack the process lives and gets the signal through os/signal.
func TestHandlersOnAltStack(t *testing.T) {
	switch childMode() {
	case "stripped", "fixed":
		termOnStrippedHandler(t, childMode() == "fixed")
		return
	}
	out, err := runChild(t, "TestHandlersOnAltStack", "stripped")
	if err == nil || !strings.Contains(out, "SA_ONSTACK") {
		t.Errorf("control: SIGTERM on a handler without SA_ONSTACK should kill the process with Go's complaint about it; it ended %v:\n%s", err, out)
	}
	if out, err := runChild(t, "TestHandlersOnAltStack", "fixed"); err != nil {
		t.Errorf("SIGTERM after handlersOnAltStack: %v\n%s", err, out)
	}
}

// termOnStrippedHandler is TestHandlersOnAltStack's child: it strips SA_ONSTACK from SIGTERM's
// handler, puts it back where fix says so, and sends SIGTERM to its own thread.
func termOnStrippedHandler(t *testing.T, fix bool) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, unix.SIGTERM)
	defer signal.Stop(c)
	var sa kernelSigaction
	if err := rtSigaction(unix.SIGTERM, nil, &sa); err != nil {
		t.Fatal(err)
	}
	if sa.flags&saOnStack == 0 {
		t.Fatalf("Go's SIGTERM handler has no SA_ONSTACK: flags %#x", sa.flags)
	}
	sa.flags &^= saOnStack
	if err := rtSigaction(unix.SIGTERM, &sa, nil); err != nil {
		t.Fatal(err)
	}
	if fix {
		if fixed := handlersOnAltStack(); !slices.Contains(fixed, unix.SIGTERM) {
			t.Fatalf("handlersOnAltStack fixed %v, not SIGTERM", fixed)
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
// the process lives and gets it. On the H200, before handlersOnAltStack, the child died on the worker's
// thread: "signal 15 received but handler not on signal stack".
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
	slog.SetLogLoggerLevel(slog.LevelDebug) // the line naming the handlers put on the alternate stack
	m := enginetest.Load(t, openCUDA(t), bundledDir, engine.Options{MaxRows: 8})
	enginetest.Greedy(t, m, []int32{1, 2, 3}, 6)
	c := make(chan os.Signal, 1)
	signal.Notify(c, unix.SIGTERM)
	defer signal.Stop(c)
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
