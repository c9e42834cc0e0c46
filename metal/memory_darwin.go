package metal

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// physicalMemory returns the Mac's RAM in bytes (sysctl hw.memsize): what the memory plan's
// default limit, 70% of RAM, is a share of.
func physicalMemory() (uint64, error) {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 0, fmt.Errorf("metal: read sysctl hw.memsize: %w", err)
	}
	return n, nil
}

// wiredCollectorDisabled reports whether sysctl iogpu.disable_wired_collector is set (not 0), so
// that macOS leaves the GPU memory it wired for tfd alone. An error means the sysctl could not be
// read (a macOS without it, or one where it is not a 32-bit integer).
func wiredCollectorDisabled() (bool, error) {
	v, err := unix.SysctlUint32("iogpu.disable_wired_collector")
	if err != nil {
		return false, fmt.Errorf("metal: read sysctl iogpu.disable_wired_collector: %w", err)
	}
	return v != 0, nil
}

// wiredCollectorHint is the line to log when wiredCollectorDisabled reports false.
const wiredCollectorHint = "metal: iogpu.disable_wired_collector is 0, so macOS's wired collector may " +
	"take an idle model's GPU memory back and the next request then waits for it (seconds on a large " +
	"model), residency set or not; sudo sysctl iogpu.disable_wired_collector=1 stops it until the next " +
	"boot (the memory tfd holds is then never handed to the rest of the system: keep " +
	"memory.load_limit_gb at what the machine can spare)"
