package cpu

import "golang.org/x/sys/unix"

// physicalMemory returns the machine's RAM from sysinfo(2).
func physicalMemory() uint64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}
