# cython: language_level=3, binding=True, embedsignature=True
# distutils: language = c++
# singa._wrap_kernels: the kernel registry and the CPU's GEMM library seen from Python.
#
#     >>> from singa import singa_wrap as sw
#     >>> [r for r in sw.kernel_table() if r[0] == "Add"]
#     [('Add', 'cpu', 'kernel'), ('Add', 'dnnl', 'fallback -> cpu'), ('Add', 'cuda', 'missing')]
#
# The rows are turned into strings on the C++ side (below), so that this file needs no Cython
# declaration of singa::Backend (_wrap_device reaches the device switch the same way).
from libcpp.string cimport string
from libcpp.vector cimport vector

from csinga cimport raise_py_error, register_error_classes

register_error_classes()


cdef extern from *:
    """
    #include <string>
    #include <vector>
    #include "singa/core/kernel.h"
    // One "op<TAB>backend<TAB>status" line per row of singa::ListKernels().
    static std::vector<std::string> singa_kernel_table_lines() {
      std::vector<std::string> out;
      for (const singa::KernelInfo& r : singa::ListKernels()) {
        std::string status = r.has_kernel     ? "kernel"
                             : r.has_fallback ? std::string("fallback -> ") +
                                                    singa::BackendName(r.fallback)
                                              : "missing";
        out.push_back(r.op + "\\t" + singa::BackendName(r.backend) + "\\t" + status);
      }
      return out;
    }
    """
    vector[string] singa_kernel_table_lines() except +raise_py_error


def kernel_table():
    """Every kernel slot and backend: a list of (op, backend, status) sorted by op, where status
    is 'kernel' (the backend has its own), 'fallback -> X' (it states that backend X's kernel
    runs) or 'missing'. Backends are named 'cpu' (reference), 'dnnl' (oneDNN) and 'cuda'."""
    return [tuple(line.decode().split("\t")) for line in singa_kernel_table_lines()]


# Which library runs the CPU's float32 products (singa/ops/gemm_backend.h); singa.device wraps
# these as gemm_backend(), set_gemm_backend(), last_gemm_backend().
cdef extern from "singa/ops/gemm_backend.h" namespace "singa":
    string GemmBackendName() except +raise_py_error
    string GemmBackendReason() except +raise_py_error
    void SetGemmBackend(const string& mode) except +raise_py_error
    string LastGemmBackend() except +raise_py_error


def gemm_backend():
    """'dnnl' or 'openblas': the library the CPU's float32 products use in this process."""
    return GemmBackendName().decode()


def gemm_backend_reason():
    """Why gemm_backend() is what it is (SINGA_GEMM, or the auto rule's comparison)."""
    return GemmBackendReason().decode()


def set_gemm_backend(mode):
    """Re-decide with mode ('auto', 'openblas' or 'dnnl') in place of SINGA_GEMM."""
    SetGemmBackend(mode.encode())


def last_gemm_backend():
    """'dnnl' or 'openblas': the library that ran the most recent CPU product ('none' before)."""
    return LastGemmBackend().decode()
