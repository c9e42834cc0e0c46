package cpu

import "golang.org/x/sys/unix"

// physicalMemory returns the machine's RAM from the hw.memsize sysctl.
func physicalMemory() uint64 {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return 0
	}
	return n
}
