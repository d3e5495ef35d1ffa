# The CUDA backend (USE_CUDA, Apache SINGA's name; OFF by default: the Makefile builds the CUDA
# variant in its own build directory whenever nvcc is found).
#
#   cmake -S . -B build/cuda -DUSE_CUDA=ON      # nvcc on PATH; cuBLAS/cuDNN/cuRAND/NCCL wheels
#
# nvcc's toolkit here ships cudart only. cuBLAS, cuRAND, cuDNN and NCCL come from pinned PyPI
# wheels (nvidia-cublas, nvidia-curand, nvidia-cudnn-cu13, nvidia-nccl-cu13) installed in the
# venv, under site-packages/nvidia/{cu13,cudnn,nccl}/{include,lib}; the wheels have no unversioned
# .so names, so find_library looks for the versioned ones too. SINGA_CUDA_ROOTS overrides where to
# look (a system CUDA with the libraries installed works as well: the toolkit dirs are searched).
option(USE_CUDA "Build the CUDA backend (CudaGPU, cuBLAS/cuDNN kernels)" OFF)
if(NOT USE_CUDA)
  return()
endif()

# Few architectures keep the compile short on 2 cores: Turing, Ampere as SASS, Hopper as SASS +
# PTX (which newer GPUs JIT-compile).
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "75-real;80-real;90")
endif()
enable_language(CUDA)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
find_package(CUDAToolkit REQUIRED)

if(NOT SINGA_CUDA_ROOTS)
  find_package(Python COMPONENTS Interpreter)
  execute_process(
    COMMAND ${Python_EXECUTABLE} -c "import nvidia, os; print(';'.join(os.path.join(p, s) for p in nvidia.__path__ for s in ('cu13', 'cudnn', 'nccl')))"
    OUTPUT_VARIABLE SINGA_CUDA_ROOTS OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
set(SINGA_CUDA_ROOTS "${SINGA_CUDA_ROOTS}" CACHE STRING "Where the cuBLAS/cuDNN/cuRAND/NCCL wheels live")
set(_cuda_hints ${SINGA_CUDA_ROOTS} ${CUDAToolkit_LIBRARY_ROOT})

# singa_find_cuda_lib(VAR header lib-names...): the include dir and library of one CUDA library.
function(singa_find_cuda_lib var header)
  find_path(${var}_INCLUDE_DIR ${header} HINTS ${_cuda_hints} ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  find_library(${var}_LIBRARY NAMES ${ARGN} HINTS ${_cuda_hints} ${CUDAToolkit_LIBRARY_DIR}
               PATH_SUFFIXES lib lib64)
  if(NOT ${var}_INCLUDE_DIR OR NOT ${var}_LIBRARY)
    message(FATAL_ERROR "singa: USE_CUDA=ON but ${header} / ${ARGV2} was not found (looked in "
                        "${_cuda_hints}): pip install the pinned nvidia-* wheels (Makefile "
                        "CUDA_PIP_PKGS) or set SINGA_CUDA_ROOTS")
  endif()
  set(${var}_INCLUDE_DIR ${${var}_INCLUDE_DIR} PARENT_SCOPE)
  set(${var}_LIBRARY ${${var}_LIBRARY} PARENT_SCOPE)
endfunction()

singa_find_cuda_lib(SINGA_CUBLAS cublas_v2.h cublas libcublas.so.13 libcublas.so.12)
singa_find_cuda_lib(SINGA_CURAND curand.h curand libcurand.so.10)
singa_find_cuda_lib(SINGA_CUDNN cudnn.h cudnn libcudnn.so.9)
singa_find_cuda_lib(SINGA_NCCL nccl.h nccl libnccl.so.2)
message(STATUS "singa: CUDA ${CUDAToolkit_VERSION} (archs ${CMAKE_CUDA_ARCHITECTURES}), "
               "cuBLAS ${SINGA_CUBLAS_LIBRARY}, cuDNN ${SINGA_CUDNN_LIBRARY}, "
               "NCCL ${SINGA_NCCL_LIBRARY}")
set(SINGA_CUDA_INCLUDE_DIRS ${SINGA_CUBLAS_INCLUDE_DIR} ${SINGA_CURAND_INCLUDE_DIR}
    ${SINGA_CUDNN_INCLUDE_DIR} ${SINGA_NCCL_INCLUDE_DIR})
list(REMOVE_DUPLICATES SINGA_CUDA_INCLUDE_DIRS)
# A wheel links the CUDA runtime statically: no nvidia-cuda-runtime wheel to depend on, and
# libcuda (the driver) is opened at the first CUDA call, so `import singa` works without a GPU.
if(SKBUILD)
  set(_cudart CUDA::cudart_static)
else()
  set(_cudart CUDA::cudart)
endif()
set(SINGA_CUDA_LIBRARIES ${_cudart} ${SINGA_CUBLAS_LIBRARY} ${SINGA_CURAND_LIBRARY}
    ${SINGA_CUDNN_LIBRARY} ${SINGA_NCCL_LIBRARY})
