//go:build amd64 || arm64

package cuda

import (
	"log/slog"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Signal handlers that the loaded libraries install. Go runs its signal handlers on each thread's
// alternate signal stack and asks the same of every handler non-Go code installs (SA_ONSTACK, the
// os/signal documentation), since such a handler calls Go's, which must not run on a goroutine's
// stack. A library of the CUDA backend installs a SIGTERM handler without the flag: on the H200 a
// process with the backend open died on SIGTERM, which systemd sends to stop tfd serve, with
// "fatal error: non-Go code set up signal handler without SA_ONSTACK flag", where it should have
// drained its requests and stopped (TestSIGTERMWithTheBackendOpen). handlersOnAltStack adds the
// flag to every handler that lacks it, after cuInit and again after open (NVRTC loaded, the
// context made), whether they worked or not, and at a Sync a second or more after the last look
// (CUDA 13 was seen installing handlers only after some workloads: yalue/onnxruntime_go#140);
// the library's handler then runs on the alternate stack and calls Go's from there.

// saOnStack is SA_ONSTACK.
const saOnStack = 0x08000000

// kernelSigaction is the kernel's struct sigaction on amd64 and arm64. It is read and written
// back whole with only flags changed.
type kernelSigaction struct {
	handler  uintptr // SIG_DFL 0, SIG_IGN 1, else a function
	flags    uint64
	restorer uintptr
	mask     uint64
}

// handlersOnAltStack adds SA_ONSTACK to every installed handler that lacks it and returns their
// signals. Go's own handlers have it and are left alone.
func handlersOnAltStack() []unix.Signal {
	var fixed []unix.Signal
	for sig := unix.Signal(1); sig <= 64; sig++ {
		if sig == unix.SIGKILL || sig == unix.SIGSTOP {
			continue
		}
		var sa kernelSigaction
		if rtSigaction(sig, nil, &sa) != nil || sa.handler <= 1 || sa.flags&saOnStack != 0 {
			continue
		}
		sa.flags |= saOnStack
		if rtSigaction(sig, &sa, nil) == nil {
			fixed = append(fixed, sig)
		}
	}
	return fixed
}

// putHandlersOnAltStack is handlersOnAltStack with a line at debug level naming what it changed,
// after which library (what).
func putHandlersOnAltStack(what string) {
	if fixed := handlersOnAltStack(); len(fixed) > 0 {
		names := make([]string, len(fixed))
		for i, sig := range fixed {
			names[i] = unix.SignalName(sig)
		}
		slog.Debug("cuda: signal handlers put on the alternate stack", "after", what, "signals", strings.Join(names, " "))
	}
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
