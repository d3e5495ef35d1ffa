// dlpack.h: the DLPack exchange structures (ABI version 1.0), declared from the public
// specification (https://dmlc.github.io/dlpack/latest/c_api.html) for singa's __dlpack__ and
// from_dlpack (cython/singa/_wrap_dlpack.pyx, cython/dlpack_bridge.h).
//
//   DLManagedTensorVersioned* m = ...;   // from a "dltensor_versioned" PyCapsule
//   float* p = (float*)((char*)m->dl_tensor.data + m->dl_tensor.byte_offset);
//   ...                                   // use the memory while holding m
//   if (m->deleter) m->deleter(m);        // give it back to its producer, exactly once
//
// Only what singa exchanges is declared: the field order and types are the ABI and must not
// change; names are prefixed with `singa_` where they would clash with another DLPack header.
#pragma once

#include <stdint.h>

extern "C" {

// Device types (DLDeviceType): the values singa produces or recognises.
enum {
  kSingaDLCPU = 1,
  kSingaDLCUDA = 2,
  kSingaDLCUDAHost = 3,
  kSingaDLCUDAManaged = 13,
};

// Type codes (DLDataTypeCode).
enum {
  kSingaDLInt = 0,
  kSingaDLUInt = 1,
  kSingaDLFloat = 2,
  kSingaDLBfloat = 4,
  kSingaDLComplex = 5,
  kSingaDLBool = 6,
};

// DLManagedTensorVersioned::flags bits.
#define SINGA_DLPACK_FLAG_READ_ONLY (1ULL << 0)
#define SINGA_DLPACK_FLAG_IS_COPIED (1ULL << 1)

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef struct {
  int32_t device_type;  // a DLDeviceType (a C enum: int-sized)
  int32_t device_id;
} DLDevice;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;           // start of the allocation (may be unaligned for element 0: byte_offset)
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;       // ndim entries
  int64_t* strides;     // ndim entries in elements, or NULL for compact row-major
  uint64_t byte_offset; // from data to element 0
} DLTensor;

// The legacy structure, in a "dltensor" capsule.
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

// DLPack 1.0, in a "dltensor_versioned" capsule: version first, so that a consumer can read it
// (and call the deleter) whatever follows.
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

}  // extern "C"
