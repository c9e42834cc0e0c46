package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"tfd/compute"
)

// noDevice is a driver whose device this machine lacks, as metal's on Linux.
type noDevice string

func (d noDevice) Open() (compute.Backend, error) {
	return nil, fmt.Errorf("%s: %w: %s", string(d), compute.ErrNoDevice, "not on this machine")
}

func init() {
	// The daemon's tests import only the cpu backend; these stand for the GPUs auto tries first.
	compute.Register("metal", noDevice("metal"))
	compute.Register("cuda", noDevice("cuda"))
}

// TestAutoSaysWhyItFellBack: auto tries the GPUs first and, serving on the CPU, says in one log
// line why it passed each over.
func TestAutoSaysWhyItFellBack(t *testing.T) {
	var log bytes.Buffer
	b, err := OpenBackend("auto", slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Name() != "cpu" {
		t.Fatalf("auto opened %s, want cpu", b.Name())
	}
	line := strings.TrimSpace(log.String())
	if strings.Count(line, "\n") != 0 || !strings.Contains(line, "serving on cpu") ||
		!strings.Contains(line, "metal: compute: no such device") || !strings.Contains(line, "cuda: compute: no such device") ||
		strings.Index(line, "metal") > strings.Index(line, "cuda") {
		t.Errorf("log: %q, want one line naming why metal, then cuda, were passed over", line)
	}
	if _, err := OpenBackend("metal", slog.Default()); !errors.Is(err, compute.ErrNoDevice) {
		t.Errorf("model.backend metal here: %v, want ErrNoDevice", err)
	}
}
