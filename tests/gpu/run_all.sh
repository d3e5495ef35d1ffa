#!/usr/bin/env bash
# tests/gpu/run_all.sh: the whole GPU suite, for a person on a machine with a CUDA GPU.
#
#   tests/gpu/run_all.sh                 # build (incremental), C++ GPU tests, Python GPU tests,
#                                        # then the training benchmark on the GPU
#   SKIP_BENCH=1 tests/gpu/run_all.sh    # without the benchmark
#   SKIP_BUILD=1 PY=/path/to/python tests/gpu/run_all.sh   # an existing build/cuda
#   BENCH_ARGS="--models mlp --iters 50" tests/gpu/run_all.sh
#
# Unlike `make test` on a machine without a GPU, nothing may skip for lack of a GPU here: the
# C++ run fails on any "[  SKIPPED ]" test of the GPU suites, and the Python GPU tests run with
# SINGA_REQUIRE_GPU=1 (a missing GPU then fails them instead of skipping) and fail on any skip.
# Exit status: 0 only when every step passed. Logs: $LOG_DIR (default build/cuda/gpu-logs).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
JOBS=${JOBS:-$(nproc)}
CUDA_BUILD=${CUDA_BUILD:-build/cuda}   # relative to the repository root (the Makefile's)
CB="$ROOT/$CUDA_BUILD"
LOG_DIR=${LOG_DIR:-$CB/gpu-logs}
GTEST_FILTER=${GTEST_FILTER:-'Cuda*:*Cuda*:*Gpu*:*GPU*'}
PY_GPU_TESTS=(tests/python/test_gpu.py tests/python/test_gpu_float16.py)

step() { printf '\n== %s\n' "$*"; }
fail() { printf '\nrun_all.sh: FAILED: %s\n' "$*" >&2; exit 1; }

command -v nvcc >/dev/null || fail "nvcc is not on PATH (the CUDA variant is built with it)"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
fi
mkdir -p "$LOG_DIR"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  step "build the CUDA variant ($CUDA_BUILD; incremental; SKIP_BUILD=1 skips this)"
  make cuda-build JOBS="$JOBS" CUDA_BUILD="$CUDA_BUILD"
fi
PY=${PY:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || fail "no Python at $PY (run make test first, or set PY=...)"
[ -x "$CB/tests/cpp/singa_tests" ] || fail "$CB is not built (drop SKIP_BUILD)"
# The CUDA build's package: the Python sources linked beside the CUDA-built extension.
mkdir -p "$CB/py/singa"
(cd "$CB/py/singa" && for f in "$ROOT"/singa/*; do
   case $f in *.so) ;; *) ln -sfn "$f" . ;; esac; done)
export PYTHONPATH="$CB/py"
export SINGA_EXPECT_CUDA=1

step "is a GPU usable by singa?"
(cd /tmp && "$PY" - <<'PYEOF') || fail "singa sees no GPU: the GPU suites would only skip"
from singa import device, singa_wrap
assert singa_wrap.USE_CUDA, "this singa_wrap was built without CUDA"
n = device.get_num_gpus()
print("USE_CUDA=%s, %d GPU(s): %s" % (singa_wrap.USE_CUDA, n, device.get_gpu_ids()))
assert n > 0
print(device.device_query(0))
PYEOF

step "C++ GPU tests (--gtest_filter=$GTEST_FILTER)"
set +e
"$CB/tests/cpp/singa_tests" --gtest_filter="$GTEST_FILTER" 2>&1 | tee "$LOG_DIR/cpp.log"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || fail "C++ GPU tests (exit $rc; $LOG_DIR/cpp.log)"
grep -q '^\[==========\] [1-9][0-9]* tests\? from' "$LOG_DIR/cpp.log" \
  || fail "the filter $GTEST_FILTER selected no C++ test"
if grep -q '^\[  SKIPPED \]' "$LOG_DIR/cpp.log"; then
  grep '^\[  SKIPPED \]' "$LOG_DIR/cpp.log" >&2
  fail "C++ GPU tests skipped (above); on a GPU machine every one must run"
fi

step "the C++ registry and pool tests of the CUDA build"
"$CB/tests/cpp/singa_tests" --gtest_filter='Registry*:*Pool*:*Allocator*' --gtest_brief=1 \
  2>&1 | tee "$LOG_DIR/cpp-registry.log" || fail "registry/pool tests ($LOG_DIR/cpp-registry.log)"

step "Python GPU tests (no skip allowed): ${PY_GPU_TESTS[*]}"
set +e
(cd /tmp && SINGA_REQUIRE_GPU=1 "$PY" -m pytest -q -rs -p no:cacheprovider \
   "${PY_GPU_TESTS[@]/#/$ROOT/}") 2>&1 | tee "$LOG_DIR/python-gpu.log"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || fail "Python GPU tests (exit $rc; $LOG_DIR/python-gpu.log)"
if tail -n 5 "$LOG_DIR/python-gpu.log" | grep -Eq '[0-9]+ skipped'; then
  grep '^SKIPPED' "$LOG_DIR/python-gpu.log" >&2 || true
  fail "Python GPU tests skipped (above); on a GPU machine every one must run"
fi

step "the whole Python suite against the CUDA build (CPU-only tests may skip here)"
(cd /tmp && "$PY" -m pytest -q -rs -p no:cacheprovider "$ROOT/tests/python") 2>&1 \
  | tee "$LOG_DIR/python-all.log" || fail "Python suite on the CUDA build ($LOG_DIR/python-all.log)"

if [ "${SKIP_BENCH:-0}" != 1 ]; then
  step "training benchmark on the GPU"
  # shellcheck disable=SC2086
  "$PY" benchmarks/bench_train.py --device gpu ${BENCH_ARGS:---models mlp cnn resnet18 --iters 20} \
    2>&1 | tee "$LOG_DIR/bench_train_gpu.md"
fi

printf '\nrun_all.sh: every GPU test passed, none skipped (logs in %s)\n' "$LOG_DIR"
