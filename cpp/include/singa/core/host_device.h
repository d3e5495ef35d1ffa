// singa/core/host_device.h: SINGA_HOST_DEVICE marks a function that one source compiles for the
// host and, under nvcc, for the GPU too (the elementwise functors, the pooling window).
//
//   SINGA_HOST_DEVICE inline float Twice(float x) { return 2.f * x; }
#pragma once

#ifdef __CUDACC__
#define SINGA_HOST_DEVICE __host__ __device__
#else
#define SINGA_HOST_DEVICE
#endif
