//go:build amd64 || arm64

package cuda

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Signal handlers that the loaded libraries install. Go owns a Go program's signals: tfd serve
// asks os/signal for SIGTERM, which systemd sends to stop it, to drain its requests, and Go's
// handlers run on each thread's alternate signal stack. While open compiles the kernels, a
// library of the CUDA backend changes the actions of SIGINT, SIGTERM and SIGXFSZ (on the H200
// after open, not after cuInit: NVRTC, whose compiler registers handlers and puts back the ones
// before it through the C library, is the likely one): the handler is Go's function again, but
// its flags are not Go's, SA_ONSTACK gone, and a process with the backend open died on SIGTERM
// with "fatal error: non-Go code set up signal handler without SA_ONSTACK flag"
// (TestSIGTERMWithTheBackendOpen). Adding the flag alone was not enough to pass that test. So
// the backend reads every signal's action before it loads libcuda and puts back each that a
// library changed, whole, after cuInit and after open (whether they worked or not): the
// libraries need no handler to run kernels, and the process keeps Go's. Sync looks again a
// second or more after the last look: no action was seen changing after open on the H200,
// through a decode with graphs captured and replayed, but onnxruntime_go's users saw CUDA 13
// install handlers only after some workloads (yalue/onnxruntime_go#140), and the look costs 64
// system calls.
//
// A changed action is a library's when it is a handler that is not Go's: Go's own changes after
// the backend opened (signal.Ignore, signal.Reset, signal.Notify of a signal that was ignored at
// start) install SIG_IGN, SIG_DFL or Go's handler with Go's flags, and stand.

// saOnStack is SA_ONSTACK.
const saOnStack = 0x08000000

// kernelSigaction is the kernel's struct sigaction on amd64 and arm64, read and written back
// whole.
type kernelSigaction struct {
	handler  uintptr // SIG_DFL 0, SIG_IGN 1, else a function
	flags    uint64
	restorer uintptr
	mask     uint64
}

// sigactions is every signal's action at one moment, indexed by signal number (1 to 64).
type sigactions [65]kernelSigaction

// readSigactions reads every signal's action (one the kernel will not report stays zero).
func readSigactions() *sigactions {
	var s sigactions
	for sig := unix.Signal(1); sig <= 64; sig++ {
		rtSigaction(sig, nil, &s[sig])
	}
	return &s
}

// restoreSigactions puts back the action in saved of every signal whose action now differs from
// it and is a handler, but not Go's own, and returns those signals with the handlers that it
// replaced. Go's action is the one saved for SIGURG, which Go always handles (goroutine
// preemption): every handler Go installs has its function, flags and restorer.
func restoreSigactions(saved *sigactions) (changed []unix.Signal, handlers []uintptr) {
	goAction := saved[unix.SIGURG]
	isGo := func(a kernelSigaction) bool {
		return a.handler == goAction.handler && a.flags == goAction.flags && a.restorer == goAction.restorer
	}
	for sig := unix.Signal(1); sig <= 64; sig++ {
		if sig == unix.SIGKILL || sig == unix.SIGSTOP {
			continue
		}
		var now kernelSigaction
		if rtSigaction(sig, nil, &now) != nil || now == saved[sig] || now.handler <= 1 || isGo(now) {
			continue
		}
		if rtSigaction(sig, &saved[sig], nil) == nil {
			changed = append(changed, sig)
			handlers = append(handlers, now.handler)
		}
	}
	return changed, handlers
}

// putBackSigactions is restoreSigactions with a line naming what was put back, after which
// library call (after), and where the handlers that had replaced Go's live.
func putBackSigactions(saved *sigactions, after string) {
	if saved == nil { // a backend made without loadDriver, as the fake device's tests make
		return
	}
	changed, handlers := restoreSigactions(saved)
	if len(changed) == 0 {
		return
	}
	names := make([]string, len(changed))
	for i, sig := range changed {
		names[i] = unix.SignalName(sig)
	}
	slog.Debug("cuda: signal actions a library changed put back", "after", after,
		"signals", strings.Join(names, " "), "handler_in", mappedFile(handlers[0]))
}

// mappedFile names the file mapped at addr in this process, or says why it cannot.
func mappedFile(addr uintptr) string {
	if addr <= 1 {
		return [2]string{"SIG_DFL", "SIG_IGN"}[addr]
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 7f2c5a000000-7f2c5a021000 r-xp 00000000 fd:01 1234 /usr/lib/x86_64-linux-gnu/libcuda.so.1
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || uint64(addr) < start || uint64(addr) >= end {
			continue
		}
		if len(fields) < 6 {
			return "anonymous memory"
		}
		return filepath.Base(fields[5])
	}
	return fmt.Sprintf("%#x, in no mapping", addr)
}

// rtSigaction is the rt_sigaction system call: it installs act (unless nil) and reports the
// action before it in old (unless nil).
func rtSigaction(sig unix.Signal, act, old *kernelSigaction) error {
	const sigsetBytes = 8
	_, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(act)), uintptr(unsafe.Pointer(old)), sigsetBytes, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
