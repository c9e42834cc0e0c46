// Package metal is the compute backend for Apple silicon GPUs, registered as "metal". It reaches
// Metal through purego's Objective-C runtime (no cgo), runs the Metal Shading Language that
// tfd/kernels emits, and keeps every buffer it makes resident in one MTLResidencySet, with idle
// ticks that keep the GPU's memory wired between requests.
//
// The package is split so that Linux can test all of it that is not an Objective-C call:
//
//   - device.go (every platform) names what the residency keeper needs of Metal: the gpu,
//     residencySet and allocation interfaces. The darwin files implement them with Metal; the
//     tests implement them with a fake device.
//   - residency.go (every platform) is the keeper: the registry of live buffers, staging and
//     commit points, whole-or-none against the memory bound, and the idle tick.
//   - memory_darwin.go reads what the memory plan needs of a Mac: its RAM (hw.memsize) and
//     whether iogpu.disable_wired_collector keeps macOS off the GPU memory tfd wires.
//   - the other *_darwin.go files are the Objective-C binding (one Go type per protocol,
//     selectors as package variables) and the compute.Backend built on it.
package metal
