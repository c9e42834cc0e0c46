package cuda

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestKernelsCompile compiles every kernel with NVRTC for Hopper (sm_90). It needs NVRTC only, not
// a GPU, so it runs wherever libnvrtc is found (set TFD_NVRTC to its path).
func TestKernelsCompile(t *testing.T) {
	arch := os.Getenv("TFD_CUDA_ARCH")
	if arch == "" {
		arch = "sm_90"
	}
	start := time.Now()
	log, err := compileForTest(arch)
	if err != nil {
		if strings.Contains(err.Error(), "no NVRTC library") || strings.Contains(err.Error(), "Linux-only") {
			t.Skip("no NVRTC here: ", err)
		}
		t.Fatal(err)
	}
	t.Logf("NVRTC compiled the kernels for %s in %v", arch, time.Since(start).Round(time.Millisecond))
	// ptxas's report: registers, and any spills, of each kernel.
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "spill") && !strings.Contains(line, " 0 bytes spill stores, 0 bytes spill loads") {
			t.Logf("%s", line)
		}
		if testing.Verbose() && strings.Contains(line, "Used") {
			t.Logf("%s", strings.TrimSpace(line))
		}
	}
}

// TestDescribe opens the backend and says which device it found.
func TestDescribe(t *testing.T) {
	b := openCUDA(t)
	if d, ok := b.(interface{ Describe() string }); ok {
		t.Logf("%s; Memory() = %d bytes", d.Describe(), b.Memory())
	}
	if b.Memory() == 0 {
		t.Error("Memory() = 0")
	}
}
