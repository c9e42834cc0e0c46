//go:build !linux && !darwin

package cpu

// physicalMemory is unknown on this system; the memory plan then needs memory.load_limit_gb.
func physicalMemory() uint64 { return 0 }
