//go:build amd64 || arm64

package cuda

import "tfd/compute"

// setGraphs turns the cuda backend's graphs on or off (graph_linux.go).
func setGraphs(b compute.Backend, on bool) { b.(*backend).setGraphs(on) }

// graphState reports the cuda backend's graph state: on, graphs captured and replayed, and why
// they were turned off if they failed.
func graphState(b compute.Backend) (on bool, captures, replays int, err error) {
	return b.(*backend).graphState()
}
