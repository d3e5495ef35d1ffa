// What crosses the dlopen boundary between libsinga (communicator.cc) and libsinga_mpi.so
// (communicator_mpi.cc): one table of entry points, returned by the C function
// `singa_mpi_table` that libsinga looks up after loading the library.
//
//   const Communicator::Mpi& mpi = ...;   // communicator.cc: MpiOrThrow(op)
//   mpi.init(comm, buff_size);            // joins MPI's world
#pragma once

#include <cstddef>
#include <vector>

#include "singa/dist/communicator.h"

namespace singa {

// How a collective combines the values (Communicator::Submit's `mode`).
enum CommMode { kDense = 0, kHalf = 1, kSparse = 2 };

// Both libraries come from one build; the version only catches a stale libsinga_mpi.so left
// beside a newer libsinga.
constexpr int kMpiTableVersion = 2;

struct Communicator::Mpi {
  int version;
  void (*init)(Communicator&, size_t buff_size);
  void (*set_overlap)(Communicator&, bool on);
  void (*broadcast_nccl_id)(Communicator&);
  int (*start_bucket)(Communicator&, std::vector<Tensor>& ts, bool half);
  void (*wait_bucket)(Communicator&, int handle, float scale);
  void (*submit)(Communicator&, std::vector<Tensor>& ts, OpId id, int mode, float scale,
                 float spars, bool topK, Tensor* acc);
  void (*abort)(int code);
  void (*finalize)();

  static const Mpi& Table();  // communicator_mpi.cc
};

}  // namespace singa
