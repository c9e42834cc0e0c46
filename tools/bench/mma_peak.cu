// mma_peak measures the tensor cores' throughput for the instruction tfd's matmuls use,
// mma.sync.m16n8k16 with BF16 operands and F32 accumulators, with operands in registers and
// NACC independent accumulators a warp (so no load and no dependency limits it): the ceiling the
// matmul kernels' TFLOP/s are read against (docs/performance.md). On the GPU machine:
//
//   nvcc -O3 -arch=sm_90 -o /tmp/mma_peak tools/bench/mma_peak.cu && /tmp/mma_peak
//
// A product counts 2 flops; an m16n8k16 is 16·8·16 products.
#include <cstdio>
#include <cuda_runtime.h>

template <int NACC>
__global__ void peak(float* out, int iters) {
	float acc[NACC][4];
	for (int j = 0; j < NACC; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
	// BF16 pairs near 1.0, different in every lane.
	unsigned a0 = 0x3f803f80u ^ threadIdx.x, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3, b0 = a0 + 4, b1 = a0 + 5;
	for (int i = 0; i < iters; i++) {
#pragma unroll
		for (int j = 0; j < NACC; j++)
			asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
			             : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
			             : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
	}
	float s = 0;
	for (int j = 0; j < NACC; j++) s += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
	if (s == 1234.5f) out[0] = s; // keeps the sums alive
}

template <int NACC>
void run(int sms, int warpsPerSM) {
	float* out;
	cudaMalloc(&out, 4);
	int threads = 32 * (warpsPerSM > 8 ? 8 : warpsPerSM);
	int blocks = sms * warpsPerSM * 32 / threads;
	const int iters = 4096, reps = 5;
	peak<NACC><<<blocks, threads>>>(out, iters); // warm-up
	cudaEvent_t e0, e1;
	cudaEventCreate(&e0);
	cudaEventCreate(&e1);
	cudaEventRecord(e0);
	for (int r = 0; r < reps; r++) peak<NACC><<<blocks, threads>>>(out, iters);
	cudaEventRecord(e1);
	cudaEventSynchronize(e1);
	float ms;
	cudaEventElapsedTime(&ms, e0, e1);
	double flops = (double)reps * blocks * (threads / 32) * iters * NACC * (2.0 * 16 * 8 * 16);
	printf("NACC=%2d warps/SM=%2d: %.1f TFLOP/s (%.3f ms a launch)\n", NACC, warpsPerSM, flops / (ms * 1e-3) / 1e12, ms / reps);
	cudaFree(out);
}

int main() {
	int sms;
	cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
	for (int w : {4, 8, 16, 32}) {
		run<4>(sms, w);
		run<8>(sms, w);
		run<16>(sms, w);
	}
	return 0;
}
