// Wrong kernels, built into the MSL runner beside tfd's own (kernels/msl_run_test.go,
// TestMSLRunRejects): each makes a mistake the runner must catch, to show that the run check can
// fail. Written in the dialect of prelude.metal, one signature a line as the generator writes them.

// Reads threadgroup memory that no thread wrote: the garbage a group starts with shows as NaN.
[[max_total_threads_per_threadgroup(128)]] kernel void bad_unwritten_shared(device float* dst [[buffer(0)]], uint3 tfd_local [[thread_position_in_threadgroup]])
{
	SHARED float s[128];
	if (LOCAL_X < 64) s[LOCAL_X] = 1.0f;
	BARRIER();
	dst[LOCAL_X] = s[127 - LOCAL_X];
}

// Reads a neighbour's threadgroup memory without a barrier: whichever of the two runs first reads
// garbage.
[[max_total_threads_per_threadgroup(128)]] kernel void bad_missing_barrier(device float* dst [[buffer(0)]], uint3 tfd_local [[thread_position_in_threadgroup]])
{
	SHARED float s[128];
	s[LOCAL_X] = (float)LOCAL_X;
	dst[LOCAL_X] = s[LOCAL_X ^ 1];
}

// Half the group returns before a barrier the other half waits at.
[[max_total_threads_per_threadgroup(128)]] kernel void bad_barrier_after_return(device float* dst [[buffer(0)]], uint3 tfd_local [[thread_position_in_threadgroup]])
{
	SHARED float s[128];
	if (LOCAL_X >= 64) return;
	s[LOCAL_X] = 1.0f;
	BARRIER();
	dst[LOCAL_X] = s[LOCAL_X];
}

// Two halves of the group wait at two different barriers.
[[max_total_threads_per_threadgroup(128)]] kernel void bad_divergent_barriers(device float* dst [[buffer(0)]], uint3 tfd_local [[thread_position_in_threadgroup]])
{
	if (LOCAL_X < 64) {
		BARRIER();
	} else {
		BARRIER();
	}
	dst[LOCAL_X] = 1.0f;
}

// Lane 0 waits at a barrier while the rest of its SIMD group waits for it at a shuffle.
[[max_total_threads_per_threadgroup(32)]] kernel void bad_deadlock(device float* dst [[buffer(0)]], ushort tfd_lane [[thread_index_in_simdgroup]])
{
	float v = dst[LANE];
	if (LANE == 0) {
		BARRIER();
	} else {
		v = SHFL_XOR(v, 1);
	}
	dst[LANE] = v;
}

// Lanes 16..31 return, and lanes 0..15 then read them in a butterfly.
[[max_total_threads_per_threadgroup(32)]] kernel void bad_shuffle_returned(device float* dst [[buffer(0)]], ushort tfd_lane [[thread_index_in_simdgroup]])
{
	if (LANE >= 16) return;
	float v = dst[LANE];
	v = ADD(v, SHFL_XOR(v, 16));
	dst[LANE] = v;
}

// report() as it was first written: one weak compare-and-swap, which may fail spuriously.
[[max_total_threads_per_threadgroup(32)]] kernel void bad_report_once(ERRPTR err [[buffer(0)]], uint3 tfd_local [[thread_position_in_threadgroup]])
{
	if (LOCAL_X == 0) {
		int zero = 0;
		if (atomic_compare_exchange_weak_explicit(err, &zero, 7, memory_order_relaxed, memory_order_relaxed)) {
			atomic_store_explicit(err + 1, 1, memory_order_relaxed);
		}
	}
}

// Thread t reads element t+1 of a buffer of as many elements as threads.
[[max_total_threads_per_threadgroup(32)]] kernel void bad_read_past_end(device float* dst [[buffer(0)]], uint3 tfd_local [[thread_position_in_threadgroup]])
{
	float v = dst[LOCAL_X + 1];
	BARRIER();
	dst[LOCAL_X] = v;
}

// A 16-byte vector load from an offset that is 4 bytes past a 16-byte boundary.
[[max_total_threads_per_threadgroup(32)]] kernel void bad_misaligned(device float* dst [[buffer(0)]], uint3 tfd_local [[thread_position_in_threadgroup]])
{
	float4 v = VLOAD(float4, dst + 4 * LOCAL_X + 1);
	dst[LOCAL_X] = v.x;
}
