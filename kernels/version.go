package kernels

// Version names the arithmetic of tfd's backends: these kernels, the cpu backend's routines, the
// orders of their reductions and the layout of the KV cache. Model state computed by one Version
// (the prompt cache's blocks, in memory and spilled to disk) is valid only under the same
// Version, so it must change whenever any backend's arithmetic could change a bit of a result:
// a kernel's or a cpu routine's order of operations, an exp or a norm written another way, a
// cache kept in another dtype. A change that moves no bit (a faster launch, a new op no
// forward used before) leaves it alone.
const Version = "2" // 2: BF16 matmuls on the matrix unit
