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
//   - api.go (every platform) is the part of Apple's API tfd uses, as data: the enum values and
//     every Objective-C message with its argument kinds. selectors_test.go checks it on Linux
//     against Apple's metal-cpp headers and against the darwin sources.
//   - the other *_darwin.go files are the Objective-C binding (objc_darwin.go, mtl_darwin.go: one
//     Go type per protocol, selectors registered from api.go as package variables) and the
//     compute.Backend built on it (backend, tensor, ops and gpu_darwin.go). metal.go registers
//     the backend on every platform; open_other.go says why there is none off Apple silicon.
package metal
