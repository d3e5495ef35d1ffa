# Finds OpenBLAS (preferring Debian's OpenMP build: one threading runtime for BLAS and our own
# kernels, see LESSONS.md #5) and OpenMP.
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
