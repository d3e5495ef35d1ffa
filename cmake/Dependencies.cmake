# Finds OpenBLAS (preferring Debian's OpenMP build: one threading runtime for BLAS and our own
# kernels, see LESSONS.md #5), OpenMP and, optionally, oneDNN (USE_DNNL).
find_package(OpenMP REQUIRED COMPONENTS CXX)

set(_blas_hints /usr/lib/x86_64-linux-gnu/openblas-openmp /usr/lib/aarch64-linux-gnu/openblas-openmp)
set(_blas_inc_hints /usr/include/x86_64-linux-gnu/openblas-openmp /usr/include/aarch64-linux-gnu/openblas-openmp)
find_library(SINGA_BLAS_LIBRARY NAMES openblas PATHS ${_blas_hints} NO_DEFAULT_PATH)
find_path(SINGA_BLAS_INCLUDE_DIR cblas.h PATHS ${_blas_inc_hints} NO_DEFAULT_PATH)
if(NOT SINGA_BLAS_LIBRARY OR NOT SINGA_BLAS_INCLUDE_DIR)
  # Any other OpenBLAS (pthreads or a custom build): still correct, maybe two thread pools.
  find_package(OpenBLAS CONFIG QUIET)
  if(OpenBLAS_FOUND)
    set(SINGA_BLAS_LIBRARY ${OpenBLAS_LIBRARIES} CACHE FILEPATH "" FORCE)
    set(SINGA_BLAS_INCLUDE_DIR ${OpenBLAS_INCLUDE_DIRS} CACHE PATH "" FORCE)
  else()
    find_library(SINGA_BLAS_LIBRARY NAMES openblas REQUIRED)
    find_path(SINGA_BLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas REQUIRED)
  endif()
endif()
message(STATUS "singa: BLAS ${SINGA_BLAS_LIBRARY} (cblas.h in ${SINGA_BLAS_INCLUDE_DIR})")

# oneDNN (Debian's libdnnl-dev: built on GNU OpenMP, the runtime OpenBLAS and our kernels use, so
# singa::SetNumThreads sets the thread count of all three). ON by default when found.
find_package(dnnl CONFIG QUIET)
option(USE_DNNL "Build the oneDNN CPU backend (kCpuDnnl)" ${dnnl_FOUND})
if(USE_DNNL AND NOT dnnl_FOUND)
  message(FATAL_ERROR "singa: USE_DNNL=ON but oneDNN was not found: install libdnnl-dev "
                      "(apt-get install libdnnl-dev) or configure with -DUSE_DNNL=OFF")
elseif(USE_DNNL)
  message(STATUS "singa: oneDNN ${dnnl_VERSION} (USE_DNNL=ON: CppCPU computes with oneDNN)")
else()
  message(STATUS "singa: USE_DNNL=OFF (oneDNN not found or disabled): reference CPU kernels "
                 "only; install libdnnl-dev for the oneDNN backend")
endif()

# Open MPI (Debian's openmpi-bin libopenmpi-dev) for the distributed collectives
# (singa::Communicator, opt.DistOpt). USE_DIST (Apache SINGA's name) is ON by default when found.
find_package(MPI COMPONENTS CXX QUIET)
option(USE_DIST "Build the MPI collectives (singa::Communicator, opt.DistOpt)" ${MPI_CXX_FOUND})
if(USE_DIST AND NOT MPI_CXX_FOUND)
  message(FATAL_ERROR "singa: USE_DIST=ON but MPI was not found: install openmpi-bin "
                      "libopenmpi-dev or configure with -DUSE_DIST=OFF")
elseif(USE_DIST)
  message(STATUS "singa: MPI ${MPI_CXX_VERSION} (USE_DIST=ON: Communicator and DistOpt)")
else()
  message(STATUS "singa: USE_DIST=OFF: no distributed training (install libopenmpi-dev)")
endif()
