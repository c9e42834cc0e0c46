package cuda

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestKernelsCompile compiles every kernel with NVRTC for Hopper (sm_90; TFD_CUDA_ARCH=sm_90a for the
// code the backend compiles on an H100 or H200, with wgmma). It needs NVRTC only, not
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
	// ptxas's report: registers, and any spills, warnings or losses it names (wgmma serialized is
	// an info line, "(C7515) Potential Performance Loss: …", before the kernels' properties, and
	// names its kernel itself), of each kernel.
	fn := ""
	for _, line := range strings.Split(log, "\n") {
		if _, name, ok := strings.Cut(line, "Function properties for "); ok {
			fn = strings.TrimSpace(name)
		}
		if strings.Contains(line, "Performance Loss") {
			t.Log(strings.TrimSpace(line))
			continue
		}
		if strings.Contains(line, "warning") || strings.Contains(line, "spill") && !strings.Contains(line, " 0 bytes spill stores, 0 bytes spill loads") {
			t.Logf("%s: %s", fn, strings.TrimSpace(line))
		}
		if testing.Verbose() && strings.Contains(line, "Used") {
			t.Logf("%s: %s", fn, strings.TrimSpace(line))
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
