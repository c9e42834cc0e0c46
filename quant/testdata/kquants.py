"""Makes the K-quant test data of package quant from llama.cpp's own code.

kquants-x.f32 holds 8 rows of 512 F32 values (little-endian), made here; q4_k.bin and q6_k.bin
are those rows quantized by ggml's quantize_row_q4_K_ref and quantize_row_q6_K_ref (called in the
libggml-base.so that node-llama-cpp ships); q4_k-dequant.f32 and q6_k-dequant.f32 are those
blocks dequantized by gguf-py's quants.py (numpy). Run with Debian's python3 and python3-numpy:

    LIBGGML=/tmp/nlcx/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so \
    GGUF_PY=/tmp/qf/llama.cpp/gguf-py /usr/bin/python3 quant/testdata/kquants.py quant/testdata

where GGUF_PY is gguf-py in a clone of node-llama-cpp's llama/gitRelease.bundle.
"""
import ctypes
import os
import sys

import numpy as np

sys.path.insert(0, os.environ["GGUF_PY"])
from gguf import quants  # noqa: E402
from gguf.constants import GGMLQuantizationType  # noqa: E402

ROWS, N = 8, 512
rng = np.random.default_rng(15)
x = rng.standard_normal((ROWS, N)).astype(np.float32) * np.float32(0.02)
x[1] = np.abs(x[1]) + np.float32(0.5)          # all positive: the min is clamped to 0
x[2, ::3] = 0                                  # zeros among the values
x[3, 17] = np.float32(3.0)                     # one outlier a super-block
x[3, 300] = np.float32(-2.5)
x[4] *= np.float32(1e-6)                       # tiny values
x[5, :256] = 0                                 # an all-zero super-block
x[6] = np.float32(0.125)                       # a constant row
x[7] = np.linspace(-1, 1, N, dtype=np.float32) # a ramp

out = sys.argv[1]
x.tofile(os.path.join(out, "kquants-x.f32"))
lib = ctypes.CDLL(os.environ["LIBGGML"])
for name, qtype, size in (("q4_k", GGMLQuantizationType.Q4_K, 144), ("q6_k", GGMLQuantizationType.Q6_K, 210)):
    fn = getattr(lib, "quantize_row_%s_ref" % name.replace("k", "K"))
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    q = np.zeros((ROWS, N // 256 * size), dtype=np.uint8)
    for r in range(ROWS):
        row = np.ascontiguousarray(x[r])
        fn(row.ctypes.data, q[r].ctypes.data, N)
    q.tofile(os.path.join(out, name + ".bin"))
    deq = quants.dequantize(q, qtype).astype(np.float32)
    deq.tofile(os.path.join(out, name + "-dequant.f32"))
    print(name, q.shape, float(np.abs(deq - x).max()))
