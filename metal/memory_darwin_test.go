package metal

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// sysctlCommand reads a sysctl as sysctl(8) prints it, to check the functions against.
func sysctlCommand(t *testing.T, name string) (string, bool) {
	t.Helper()
	out, err := exec.Command("/usr/sbin/sysctl", "-n", name).Output()
	return strings.TrimSpace(string(out)), err == nil
}

// TestPhysicalMemory: hw.memsize as sysctl(8) reads it.
func TestPhysicalMemory(t *testing.T) {
	n, err := physicalMemory()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := sysctlCommand(t, "hw.memsize")
	if strconv.FormatUint(n, 10) != want || n < 1<<30 {
		t.Fatalf("physicalMemory = %d, sysctl(8) says %q", n, want)
	}
}

// TestWiredCollectorDisabled: the setting as sysctl(8) reads it, or an error where it has none.
func TestWiredCollectorDisabled(t *testing.T) {
	disabled, err := wiredCollectorDisabled()
	want, ok := sysctlCommand(t, "iogpu.disable_wired_collector")
	switch {
	case !ok && err == nil:
		t.Fatalf("wiredCollectorDisabled = %v, but sysctl(8) has no iogpu.disable_wired_collector", disabled)
	case ok && err != nil:
		t.Fatalf("wiredCollectorDisabled: %v; sysctl(8) says %q", err, want)
	case ok && disabled != (want != "0"):
		t.Fatalf("wiredCollectorDisabled = %v, sysctl(8) says %q", disabled, want)
	}
}
