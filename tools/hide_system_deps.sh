#!/usr/bin/env bash
# tools/hide_system_deps.sh: run a command as on the GPU image, without this machine's OpenBLAS,
# oneDNN, GoogleTest and Open MPI (libraries, headers, CMake configs, launchers).
#
#   tools/hide_system_deps.sh --can          # exit 0 where it works (root and unshare -m)
#   tools/hide_system_deps.sh python -m pytest tests/python   # the suite as the GPU image sees it
#   tools/hide_system_deps.sh --openmp CMD   # GNU OpenMP too (tools/wheel_test.sh: what the wheel
#                                            # does not bundle cannot load)
#
# The GPU image has none of them: tools/gpu_check.sh builds against the .debs it unpacks into a
# prefix of its own. A test that leans on the system's copies (a child process that imports the
# repository's build, a configure that finds the system's OpenBLAS, an mpirun on PATH) passes here
# and fails there, where device time is short. In a private mount namespace each such file reads
# as /dev/null and each such folder as an empty tmpfs; nothing outside the command changes.
set -uo pipefail
can() { [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; }
if [ "${1:-}" = --can ]; then can; exit; fi
libs="openblas|blas|cblas|lapack|dnnl|mpi|mpi_cxx|open-pal|open-rte|gtest|gtest_main|gmock|gmock_main"
if [ "${1:-}" = --openmp ]; then libs+="|gomp"; shift; fi
[ $# -gt 0 ] || { echo "usage: $0 [--can | [--openmp] COMMAND [ARGS...]]" >&2; exit 2; }
can || { echo "$0: needs root and unshare -m (a private mount namespace)" >&2; exit 2; }

files=$(find /lib /lib64 /usr/lib /usr/lib64 /usr/local/lib -xdev -regextype posix-extended \
  -type f -regex ".*/lib($libs)[-_.a-z0-9]*\\.(so[.0-9]*|a)" 2>/dev/null)
files+=" $(find /usr/bin /usr/local/bin -xdev -regextype posix-extended -type f \
  -regex '.*/(mpirun|mpiexec|orterun|orted|prterun|prted|prte|mpicc|mpicxx|opal_wrapper)(\.[a-z]+)?' 2>/dev/null)"
files+=" $(find /usr/include /usr/include/x86_64-linux-gnu /usr/include/aarch64-linux-gnu \
  -maxdepth 1 -type f \( -name 'dnnl*.h*' -o -name 'cblas*.h' -o -name 'mpi*.h' \) 2>/dev/null)"
dirs=""
for d in /usr/include/{x86_64,aarch64}-linux-gnu/openblas-{openmp,pthread} \
    /usr/lib/{x86_64,aarch64}-linux-gnu/openblas-{openmp,pthread} \
    /usr/lib/{x86_64,aarch64}-linux-gnu/cmake/{dnnl,GTest,openblas} \
    /usr/lib/{x86_64,aarch64}-linux-gnu/openmpi /usr/include/{oneapi,gtest,gmock}; do
  [ -d "$d" ] && [ ! -L "$d" ] && dirs+=" $d"
done
echo "== hiding $(echo $files | wc -w) files and $(echo $dirs | wc -w) folders of the system's OpenBLAS, oneDNN, GoogleTest, Open MPI$([[ $libs == *gomp ]] && echo ", GNU OpenMP")" >&2
# shellcheck disable=SC2016
exec unshare -m bash -c '
  for f in $1; do mount --bind /dev/null "$f" || exit 1; done
  for d in $2; do mount -t tmpfs none "$d" || exit 1; done
  shift 2; exec "$@"' hide "$files" "$dirs" "$@"
