package metal

import (
	"log/slog"
	"time"

	"tfd/compute"
)

func init() {
	compute.Register("metal", driver{})
}

// driver opens Metal backends.
type driver struct{}

// Open returns a backend on the Mac's GPU with DefaultResidency, or an error. Where there is no
// Metal device (not a Mac on Apple silicon, or no device the process may use) the error wraps
// compute.ErrNoDevice and says why.
func (driver) Open() (compute.Backend, error) {
	return open(DefaultResidency(), slog.Default())
}

// DefaultResidency returns the [residency] defaults: every buffer held in one residency set,
// ticked every 500 ms for 15 minutes after the last request, within the device's recommended
// working set (Limit 0).
func DefaultResidency() compute.ResidencyOptions {
	return compute.ResidencyOptions{Enabled: true, Tick: 500 * time.Millisecond, KeepWarm: 15 * time.Minute}
}
