// The MSL runner's internal interface, shared by the executing shim (metal_stdlib), the runner
// (mslcheck/runner: main.cpp reads commands, binds buffers and catches faults; sched.cpp runs
// threads, groups, barriers and SIMD groups) and the kernels' entry points that
// kernels/msl_run_test.go generates. No macros here: the runner includes it without the shim's.
#ifndef TFD_EXEC_H
#define TFD_EXEC_H

#include <cstddef>
#include <string>

namespace tfd_exec {

typedef unsigned int u3 __attribute__((ext_vector_type(3))); // MSL's uint3

// ThreadPos is where a thread is: the values of its thread-position attributes.
struct ThreadPos {
	u3 group, local, size; // [[threadgroup_position_in_grid]], [[thread_position_in_threadgroup]], [[threads_per_threadgroup]]
	unsigned lane, simd;   // [[thread_index_in_simdgroup]], [[simdgroup_index_in_threadgroup]]
};

// For the shim, from inside a kernel; line is the caller's line in the kernels' source, for
// reports.
void barrier(int line);
// simd_read gives size bytes at in to the SIMD group and waits until every lane still running has
// given its own; then out gets what lane src gave (lane ^ (src & 0xffff) when src has 0x10000 set).
void simd_read(const void* in, void* out, unsigned size, unsigned src, int line);
// shared_alloc returns the group's memory for the calling thread's next threadgroup declaration.
void* shared_alloc(size_t size, size_t align, int line);
// spurious_failure says whether a weak compare-and-swap is to fail spuriously.
bool spurious_failure();

// Thunk calls one kernel for one thread: args[i] points at the memory bound to [[buffer(i)]].
using Thunk = void (*)(void* const* args, const ThreadPos& tp);

struct KernelInfo {
	const char* name;
	Thunk thunk;
	int nargs;
	const int* sizes; // per argument: 0 for a buffer, else the bytes of a constant scalar
	int max_threads;  // [[max_total_threads_per_threadgroup(n)]]
};
extern const KernelInfo kernel_table[];
extern const int kernel_count;

// launch runs k on gx × gy threadgroups of threads threads each and returns "" or what went
// wrong: a deadlock, a barrier or shuffle that MSL leaves undefined, threadgroup memory misuse.
std::string launch(const KernelInfo& k, void* const* args, int gx, int gy, int threads, unsigned seed);

// The kernel now running, for the signal handler's message.
extern const char* volatile current_kernel;

// fail_fast reports a fault from a signal handler and ends the process.
[[noreturn]] void fail_fast(const char* what, const void* addr);

// describe_stack says whether addr is in a thread's stack or its guard page, or returns null.
const char* describe_stack(const void* addr);

} // namespace tfd_exec

#endif
