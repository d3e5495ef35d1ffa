#!/usr/bin/env bash
# make wheel-test: the repaired wheel works on its own.
#
#   tools/wheel_test.sh [build/wheelhouse/singa-*.whl]
#
# `auditwheel show` must report a manylinux tag. The wheel and its [onnx] extra are installed
# into a fresh venv in a temporary folder outside the checkout; tools/wheel_check.py then runs
# there with `python -I` (no PYTHONPATH, no script folder on sys.path) from that folder, inside a
# mount namespace (tools/hide_system_deps.sh --openmp: `unshare -m`, as root) where every file
# of the system's OpenBLAS, BLAS, oneDNN, GNU OpenMP and Open MPI is replaced by /dev/null: what
# the wheel did not bundle cannot load. Without the namespace (not root, or unshare refused) the check of /proc/self/maps still
# holds (every such library mapped comes from singa.libs), and the script says so.
# Then the [dist] extra (PyPI's Open MPI) is added to the venv and `wheel_check.py --dist 2`
# trains two DistOpt ranks started by `python -m singa.launch` with the extra's mpirun, in the
# same namespace (the system's mpirun hidden too): the ranks must end with equal parameters.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
VPY=${VPY:-$root/.venv/bin/python}
PYTHON=${PYTHON:-python3}
wheel=${1:-$(ls "$root"/build/wheelhouse/singa-*.whl)}
start=$(date +%s)

# (not `tee /dev/stderr`: reopening stderr truncates the caller's log when it is a file)
shown=$("$VPY" -m auditwheel show "$wheel")
printf '%s\n' "$shown" >&2
printf '%s\n' "$shown" | tr -s ' \n' ' ' \
  | grep -Eo 'platform tag: "manylinux_[0-9]+_[0-9]+_x86_64"' \
  || { echo "FAIL: auditwheel show reports no manylinux tag" >&2; exit 1; }

tmp=$(mktemp -d /tmp/singa-wheel-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel[onnx]"

check=("$tmp/venv/bin/python" -I "$root/tools/wheel_check.py" --examples "$root/examples")
cd "$tmp"
hide=no
if "$root/tools/hide_system_deps.sh" --can; then
  hide=yes
  echo "== the system's OpenBLAS, oneDNN, GNU OpenMP and Open MPI (mpirun too) hidden in a mount namespace"
else
  echo "== no mount namespace here (not root, or unshare refused): /proc/self/maps check only"
fi
run_check() {
  if [ $hide = yes ]; then
    env -u PYTHONPATH -u LD_LIBRARY_PATH -u LD_PRELOAD "$root/tools/hide_system_deps.sh" --openmp "$@"
  else
    env -u PYTHONPATH -u LD_LIBRARY_PATH -u LD_PRELOAD "$@"
  fi
}
run_check "${check[@]}"

dist_start=$(date +%s)
"$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel[dist,onnx]"
run_check "${check[@]}" --dist 2
echo "== [dist] extra: installed and 2 ranks trained in $(( $(date +%s) - dist_start )) s"
echo "== wheel-test passed in $(( $(date +%s) - start )) s"
