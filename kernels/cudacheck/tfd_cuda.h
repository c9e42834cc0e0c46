// What NVRTC declares before it reads kernels.CUDA(), for clang's CUDA front end without the CUDA
// toolkit (cuda_compile_test.go): the execution-space attributes, the vector types and the few
// intrinsics the dialect names, each on the clang builtin or libdevice function it stands for.
// clang's own __clang_cuda_* headers supply the thread indices and libdevice's arithmetic
// (__fmaf_rn and the other _rn intrinsics, expf, rintf, cos, sqrt, __uint_as_float).
#define CUDA_VERSION 12000
#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__ // a kernel parameter read in place (sm_70 on); clang 14 has no spelling of it

// What clang's headers take from the C library.
typedef __SIZE_TYPE__ size_t;
#define INT_MAX __INT_MAX__
#define INT_MIN (-__INT_MAX__ - 1)
#define HUGE_VAL __builtin_huge_val()
#define HUGE_VALF __builtin_huge_valf()

#include <__clang_cuda_builtin_vars.h>
#include <__clang_cuda_libdevice_declares.h>
#include <__clang_cuda_device_functions.h>
#include <__clang_cuda_math.h>

struct __attribute__((aligned(16))) float4 {
	float x, y, z, w;
};
struct __attribute__((aligned(16))) uint4 {
	unsigned int x, y, z, w;
};
struct __attribute__((aligned(8))) float2 {
	float x, y;
};
struct __attribute__((aligned(8))) uint2 {
	unsigned int x, y;
};
static __device__ __forceinline__ float2 make_float2(float x, float y)
{
	float2 v = {x, y};
	return v;
}
static __device__ __forceinline__ uint2 make_uint2(unsigned int x, unsigned int y)
{
	uint2 v = {x, y};
	return v;
}
static __device__ __forceinline__ uint4 make_uint4(unsigned int x, unsigned int y, unsigned int z, unsigned int w)
{
	uint4 v = {x, y, z, w};
	return v;
}

static __device__ __forceinline__ int atomicCAS(int* p, int cmp, int val) { return __iAtomicCAS(p, cmp, val); }

// The butterfly shuffle of a full warp, in the overloads CUDA gives it.
static __device__ __forceinline__ int __shfl_xor_sync(unsigned int mask, int v, int m)
{
	return __nvvm_shfl_sync_bfly_i32(mask, v, m, 31);
}
static __device__ __forceinline__ unsigned int __shfl_xor_sync(unsigned int mask, unsigned int v, int m)
{
	return (unsigned int)__nvvm_shfl_sync_bfly_i32(mask, (int)v, m, 31);
}
static __device__ __forceinline__ float __shfl_xor_sync(unsigned int mask, float v, int m)
{
	return __nvvm_shfl_sync_bfly_f32(mask, v, m, 31);
}
static __device__ __forceinline__ float __shfl_sync(unsigned int mask, float v, int lane)
{
	return __nvvm_shfl_sync_idx_f32(mask, v, lane, 31);
}

// The sum of the four products of the signed bytes of a and b, plus c: PTX's dp4a.
static __device__ __forceinline__ int __dp4a(int a, int b, int c)
{
	int d;
	asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
	return d;
}
