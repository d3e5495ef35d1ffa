#!/usr/bin/env bash
# tools/gpu_check.sh: verify and measure the CUDA backend on a lent GPU machine, in one call.
#
#   make gpu-deps                       # here (CPU machine): .debs the GPU image lacks -> .gpu-deps/
#   run(command="tools/gpu_check.sh", carry=[".gpu-deps"], timeout_s=600)   # the device call
#   run(command="GPU_CHECK_STEPS=unpack,configure,build,diag,probe tools/gpu_check.sh", ...)
#                                       # a second, shorter call if device time is left
#   GPU_CHECK_DRY=1 tools/gpu_check.sh  # rehearsal here: unpack, configure against the prefix,
#                                       # build, the CPU half of the checks, the 64 MiB budget
#   GPU_CHECK_DRY=1 GPU_CHECK_STEPS=unpack,configure tools/gpu_check.sh   # what make test runs
#   make gpu-check-suite-dry            # the suite step here, the system's OpenBLAS, oneDNN,
#                                       # GoogleTest, Open MPI hidden (386 s, 2 cores)
#
# The GPU image (the device tool's KINDS.md) has nvcc 13, CMake, Cython, numpy, pytest, PyTorch
# CUDA and the nvidia-cublas/cudnn/nccl/curand wheels in python3's environment, but no OpenBLAS,
# oneDNN or GoogleTest: those travel as Debian packages and are unpacked with dpkg -x into a
# prefix of our own (never into /), which CMake is pointed at explicitly. Open MPI stays behind
# (USE_DIST=OFF there: one GPU, no collectives to test).
#
# Steps (GPU_CHECK_STEPS, comma-separated, run in this order): unpack, configure, build, cpp,
# diag, pygpu, pyall (the whole Python suite), bench, compile (torch.compile rows), probe (the
# measurements that decide the next defaults and kernels: cuDNN's settings one by one, the GPU
# tests under PyTorch's cuDNN settings, the GPT's per-operation profile). The default is
# unpack..bench (whose tables include the GPT's profile and benchmarks/bench_gpu_ops.py), one
# call (2026-11-28, H200: build 62 s, cpp 14, pygpu 25, the suite 94-109 s on 14 workers of one
# OpenMP thread each, bench 215; 438 s in all); GPU_CHECK_STEPS=suite is
# unpack,configure,build,diag,pyall. The session's device time is 15 minutes, starts included.
# Each step has its own time limit, and all share GPU_CHECK_DEADLINE (585 s), so a slow step
# cannot eat the report. The outputs go to $OUT (the device tool's folder; default
# build/gpu-check/out): summary.txt, gpu-report.md (the benchmark tables), diag.txt, cpp.log,
# python-gpu.log, python-all.log, build.log, python-gpu-cudnn.log (probe) (8 files: the device
# tool brings back no more).
# Exit status: 0 only when every step that ran passed and no GPU test skipped.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
DRY=${GPU_CHECK_DRY:-0}
ALL_STEPS=unpack,configure,build,cpp,diag,pygpu,pyall,bench
# dry: the whole suite is make test's job here
[ "$DRY" = 1 ] && ALL_STEPS=unpack,configure,build,cpp,diag,pygpu,bench
STEPS=${GPU_CHECK_STEPS:-$ALL_STEPS}
[ "$STEPS" = suite ] && STEPS=unpack,configure,build,diag,pyall
STEPS=",$STEPS,"
JOBS=${JOBS:-$(nproc)}
DEPS=${GPU_DEPS_DIR:-$ROOT/.gpu-deps}
PREFIX=${GPU_PREFIX:-/tmp/gpu-prefix}
OUT=${OUT:-$ROOT/build/gpu-check/out}
mkdir -p "$OUT"
if [ "$DRY" = 1 ]; then
  PY=${PY:-$ROOT/.venv/bin/python}
  B=${GPU_BUILD:-$ROOT/build/gpu-dry}
  CUDA=${GPU_CHECK_CUDA:-0}    # 1: build the CUDA variant here too (compile only)
else
  PY=${PY:-$(command -v python3)}
  B=${GPU_BUILD:-$ROOT/build/gpu}
  CUDA=1
fi
LIB=$PREFIX/usr/lib/x86_64-linux-gnu
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
STATUS=0
T0=$(date +%s)
DEADLINE=${GPU_CHECK_DEADLINE:-585}   # the whole run, within one device call's 600 s

say() { printf '%s\n' "$*" | tee -a "$SUMMARY"; }
want() { case "$STEPS" in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
# step NAME LIMIT_S CMD...: runs CMD with a time limit, logs PASS/FAIL and the seconds it took.
step() {
  local name=$1 limit=$2; shift 2
  local t=$(date +%s) rc left
  left=$(( T0 + DEADLINE - t ))
  if [ $left -lt 20 ]; then say "SKIP $name (the run's ${DEADLINE}s are spent)"; STATUS=1; return 1; fi
  [ $limit -gt $left ] && limit=$left
  printf '\n== %s (limit %ss)\n' "$name" "$limit"
  STEP_LIMIT=$limit timeout --kill-after=10 "$limit" "$@"
  rc=$?
  if [ $rc -eq 0 ]; then say "PASS $name ($(( $(date +%s) - t ))s)"
  else say "FAIL $name (exit $rc$( [ $rc -eq 124 ] && echo ': time limit'), $(( $(date +%s) - t ))s)"; STATUS=1; fi
  return $rc
}

say "gpu_check.sh $(date -u +%FT%TZ) dry=$DRY cuda=$CUDA jobs=$JOBS python=$PY"
if command -v nvidia-smi >/dev/null; then
  say "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
fi
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
command -v nvcc >/dev/null && say "nvcc: $(nvcc --version | grep -o 'release [0-9.]*')"
PYINC=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
if [ -f "$PYINC/Python.h" ]; then BUILD_PY=ON; else
  BUILD_PY=OFF; say "WARNING: no Python.h under '$PYINC': the Python extension is not built, only C++"; fi
say "python: $("$PY" -c 'import sys, numpy; print(sys.version.split()[0], "numpy", numpy.__version__)' 2>&1)"

unpack() {
  ls "$DEPS"/*.deb >/dev/null 2>&1 || { echo "no .deb in $DEPS: run make gpu-deps"; return 1; }
  rm -rf "$PREFIX" && mkdir -p "$PREFIX"
  for f in "$DEPS"/*.deb; do dpkg -x "$f" "$PREFIX" || return 1; done
  echo "unpacked $(ls "$DEPS"/*.deb | wc -l) packages into $PREFIX"
  if [ "$DRY" = 1 ]; then  # what one device call carries: the working tree (git's view) + .gpu-deps
    local tree deps
    tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
    deps=$(du -sb "$DEPS" | cut -f1)
    echo "working tree $((tree / 1048576)) MiB + .gpu-deps $((deps / 1048576)) MiB (limit 64 MiB)"
    [ $((tree + deps)) -lt $((64 * 1048576)) ] || { echo "over the 64 MiB a device call carries"; return 1; }
  fi
}

configure() {
  local args=(-S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DUSE_DIST=OFF
    -DSINGA_BLAS_LIBRARY="$LIB/openblas-openmp/libopenblas.so"
    -DSINGA_BLAS_INCLUDE_DIR="$PREFIX/usr/include/x86_64-linux-gnu/openblas-openmp"
    -Ddnnl_DIR="$LIB/cmake/dnnl" -DGTest_DIR="$LIB/cmake/GTest"
    -DCMAKE_PREFIX_PATH="$PREFIX/usr" -DCMAKE_LIBRARY_PATH="$LIB"
    -DSINGA_BUILD_TESTS=ON -DSINGA_BUILD_PYTHON=$BUILD_PY -DSINGA_PY_OUTPUT_DIR="$B/py/singa" -DPython_EXECUTABLE="$PY")
  command -v ninja >/dev/null && args+=(-G Ninja)
  [ "$CUDA" = 1 ] && args+=(-DUSE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=${GPU_ARCHS:-90})
  rm -f "$B/CMakeCache.txt"
  cmake "${args[@]}" || return 1
  # The prefix's libraries, not the system's, must be the ones found (else the rehearsal proves
  # nothing about the device, where the system has none).
  local bad=0 v
  for v in SINGA_BLAS_LIBRARY dnnl_DIR GTest_DIR; do
    if ! grep "^$v:" "$B/CMakeCache.txt" | grep -q "$PREFIX"; then
      echo "configure: $v does not come from $PREFIX: $(grep "^$v:" "$B/CMakeCache.txt")"; bad=1; fi
  done
  return $bad
}

build() {
  cmake --build "$B" -j"$JOBS" >"$OUT/build.log" 2>&1; local rc=$?
  tail -n 30 "$OUT/build.log"
  [ $rc -eq 0 ] || return $rc
  # libstdc++ linked, not copied (cmake/StdCxx.cmake: the first GPU days' Python crashes)
  local so; so=$(ls "$B"/lib/libsinga.so.*.* 2>/dev/null | head -1)
  if [ -n "$so" ] && nm -D --defined-only "$so" | grep -q '_ZNSo9_M_insertImEERSoT_'; then
    echo "libsinga carries a copy of libstdc++ (g++ finds '$(g++ -print-file-name=libstdc++.so)')" \
      | tee -a "$OUT/summary.txt"; fi
  # The package: the Python sources linked beside the extension built here.
  if [ "$BUILD_PY" = ON ]; then
    (cd "$B/py/singa" && for f in "$ROOT"/singa/*; do case $f in *.so) ;; *) ln -sfn "$f" . ;; esac; done)
  fi
}

export LD_LIBRARY_PATH="$LIB:$LIB/openblas-openmp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# what diag found to work (an environment assignment or nothing), for the Python steps
diag_env() { [ -s "$B/.diag-env" ] && export "$(cat "$B/.diag-env")"; true; }

cpp() {  # every C++ test (one process: ctest would start one per test); no GPU test may skip
  "$B/tests/cpp/singa_tests" --gtest_brief=1 2>&1 | tee "$OUT/cpp.log"; local rc=${PIPESTATUS[0]}
  # the convolutions again with FMA math (the default takes TF32 algorithms; the tolerance follows)
  echo "== SINGA_CUDNN_TF32=0: the convolution tests with FMA math" | tee -a "$OUT/cpp.log"
  SINGA_CUDNN_TF32=0 "$B/tests/cpp/singa_tests" --gtest_brief=1 --gtest_filter='CudaConv*' 2>&1 \
    | tee -a "$OUT/cpp.log"; [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/cpp.log" | tail -n 3
  if [ "$DRY" != 1 ] && grep -Eq '^\[  SKIPPED \] [^ ]*(Cuda|Gpu|GPU)' "$OUT/cpp.log"; then
    echo "GPU tests skipped on the GPU machine"; return 1; fi
  return $rc
}

# diag: does a C++ exception reach Python? On the first GPU day (2026-11-26, H200, Ubuntu's
# Python 3.12.3) every singa error raised into Python ended in a segfault while the C++ tests
# caught theirs. Each variant below runs one raising call in a fresh process; the first that
# survives is used by the later steps (printed in summary.txt), and diag.txt keeps the evidence.
diag() {
  local probe='
import numpy as np
from singa import tensor
a, b = tensor.from_numpy(np.ones((2, 3), np.float32)), tensor.from_numpy(np.ones((4,), np.float32))
try:
    a + b
except ValueError as e:
    print("raised:", type(e).__name__)
'
  local d=$OUT/diag.txt v env
  {
    echo "## kernel $(uname -r); $(grep -m1 -o 'user_shstk\|shstk' /proc/cpuinfo | head -1 || echo 'no shstk flag')"
    echo "## $(ldd --version | head -1)"
    "$PY" -c 'import sys; print(sys.version)'
    grep -i 'x86_Thread_features' /proc/self/status || true
    echo "## ldd _wrap_device (each singa._wrap_* module links libsinga alike)"; ldd "$B"/py/singa/_wrap_device*.so 2>&1 | grep -v 'linux-vdso'
  } >"$d" 2>&1
  for v in plain noshstk preload noprefix; do
    case $v in
      plain) env="" ;;
      noshstk) env="GLIBC_TUNABLES=glibc.cpu.x86_shstk=off" ;;
      preload) env="LD_PRELOAD=$(gcc -print-file-name=libgcc_s.so.1):$(gcc -print-file-name=libstdc++.so.6)" ;;
      noprefix) env="LD_LIBRARY_PATH=" ;;
    esac
    echo "## variant $v: $env" >>"$d"
    (cd /tmp && env $env PYTHONPATH="$B/py" "$PY" -X faulthandler -c "$probe") >>"$d" 2>&1
    local rc=$?
    echo "## variant $v: exit $rc" >>"$d"
    if [ $v = plain ] && [ $rc -ne 0 ] && command -v cuda-gdb >/dev/null; then
      # the C++ side of the crash (the image has no gdb; cuda-gdb debugs host code too)
      echo "## cuda-gdb backtrace of the plain variant" >>"$d"
      (cd /tmp && PYTHONPATH="$B/py" timeout 90 cuda-gdb -q -batch -ex 'set pagination off' \
         -ex run -ex bt -ex 'info sharedlibrary' --args "$PY" -c "$probe") >>"$d" 2>&1
    fi
    if [ $rc -eq 0 ]; then [ -n "$env" ] && echo "$env" >"$B/.diag-env"; echo "exceptions reach Python with variant '$v' ($env)"; return 0; fi
  done
  echo "every variant crashed: see diag.txt"; return 1
}

pygpu() {  # the GPU test files; with SINGA_REQUIRE_GPU=1 a missing GPU fails instead of skipping
  local req=1; [ "$DRY" = 1 ] && req=0
  # in parallel where xdist is (the device image has it): a test that crashes its process then
  # costs one worker, not the rest of the list
  local par=""; [ "$DRY" != 1 ] && "$PY" -c 'import xdist' 2>/dev/null && par="-n ${PYTEST_GPU_WORKERS:-6}"
  (cd /tmp && PYTHONPATH="$B/py" SINGA_EXPECT_CUDA=$CUDA SINGA_REQUIRE_GPU=$req "$PY" -m pytest -q -rs \
     -p no:cacheprovider $par "$ROOT/tests/python/test_gpu.py" "$ROOT/tests/python/test_gpu_float16.py" \
     "$ROOT/tests/python/test_cuda_build.py" "$ROOT/tests/python/test_device.py") 2>&1 \
     | tee "$OUT/python-gpu.log"
  local rc=${PIPESTATUS[0]}
  if [ "$DRY" != 1 ] && grep -Eq '^SKIPPED.*test_gpu(_float16)?\.py' "$OUT/python-gpu.log"; then
    echo "GPU tests skipped on the GPU machine"; return 1; fi
  return $rc
}

bench() {  # the seed's table on the GPU (ResNet-50 224), then the small models (capture's case)
  local dev=gpu; [ "$DRY" = 1 ] && [ "$CUDA" != 1 -o ! -e /dev/nvidia0 ] && dev=cpu
  {
    echo "# GPU report ($(date -u +%F), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
    echo; echo '`tools/gpu_check.sh` (benchmarks/bench_train.py --device gpu); Mem(MB): peak of the'
    echo "GPU pool for singa, torch.cuda.max_memory_allocated for PyTorch."
  } >"$OUT/gpu-report.md"
  if [ "$dev" = gpu ]; then
    # most wanted first: a step's time limit cuts the tail. Each row is a process of its own.
    bt() { PYTHONPATH="$B/py" "$PY" benchmarks/bench_train.py --device gpu --timeout 60 "$@"; }
    bt --models resnet50 --batch 16 --iters 10 \
      --modes layer eager bfs serial bfs-nocap torch torch-notf32 | tee -a "$OUT/gpu-report.md"
    { echo; echo "The graph at batch 16 with SINGA_CUDNN_TF32=0 (FMA math; like for like with PyTorch's TF32-off row):"
      SINGA_CUDNN_TF32=0 bt --models resnet50 --batch 16 --iters 10 --modes bfs \
        | grep -E '^\|( model| Cases|---)'; } | tee -a "$OUT/gpu-report.md"
    { echo; echo "GPT (benchmarks/bench_gpt.py --device gpu; float32 and bf16 AMP):"
      PYTHONPATH="$B/py" "$PY" benchmarks/bench_gpt.py --device gpu --iters 20 --timeout 60 \
        --modes graph graph-bf16 eager torch torch-bf16 --profile --top 12
      echo; echo "The GPT's slow operations alone (benchmarks/bench_gpu_ops.py --device gpu):"
      PYTHONPATH="$B/py" timeout 120 "$PY" benchmarks/bench_gpu_ops.py --device gpu; } \
      | tee -a "$OUT/gpu-report.md"
    { echo; echo "LSTM (benchmarks/bench_rnn.py --device gpu; cuda/rnn.cu beside PyTorch's cuDNN):"
      PYTHONPATH="$B/py" "$PY" benchmarks/bench_rnn.py --device gpu --iters 20 --timeout 60 \
        --modes graph eager torch; } | tee -a "$OUT/gpu-report.md"
    bt --models mlp cnn --batch 16 --iters 50 --modes eager bfs bfs-nocap torch \
      | tee -a "$OUT/gpu-report.md"
    bt --models mlp cnn --batch 16 --iters 50 --modes eager bfs --dtype float16 \
      | tee -a "$OUT/gpu-report.md"
    bt --models resnet50 --batch 32 --iters 10 --modes eager bfs torch torch-notf32 \
      | tee -a "$OUT/gpu-report.md"
    { echo; echo "Where ResNet-50's step goes (benchmarks/profile_ops.py, each operation synced):"
      PYTHONPATH="$B/py" timeout 60 "$PY" benchmarks/profile_ops.py resnet50 --batch 16 --iters 5 \
        --device gpu --top 20; } | tee -a "$OUT/gpu-report.md"
  else  # dry: the benchmark's own code path, on the CPU, one tiny round
    { PYTHONPATH="$B/py" "$PY" benchmarks/bench_train.py --models mlp --batch 16 --iters 1 \
        --warmup 1 --modes eager bfs
      PYTHONPATH="$B/py" "$PY" benchmarks/bench_gpt.py --layers 1 --seq 16 --batch 2 --iters 1 \
        --warmup 1 --modes graph torch
      PYTHONPATH="$B/py" "$PY" benchmarks/bench_rnn.py --seq 4 --batch 2 --hidden 8 --iters 1 \
        --warmup 1 --modes graph torch
      PYTHONPATH="$B/py" "$PY" benchmarks/bench_gpu_ops.py --batch 2 --seq 16 --repeat 1 \
        --inner 1; } | tee -a "$OUT/gpu-report.md"
  fi
  ! grep -q '| failed |' "$OUT/gpu-report.md"
}

compile() {  # torch.compile beside the same rows (its compile is slow: after the suite)
  [ -e /dev/nvidia0 ] || { echo "no GPU: nothing to compare torch.compile with"; return 0; }
  {
    echo; echo "torch.compile (default mode; the compile is paid in the warm-up, outside the timing):"
  } >>"$OUT/gpu-report.md"
  PYTHONPATH="$B/py" "$PY" benchmarks/bench_train.py --device gpu --models cnn resnet50 --batch 32 \
    --iters 10 --warmup 3 --timeout 150 --modes bfs torch torch-compile | tee -a "$OUT/gpu-report.md"
}

probe() {  # the measurements that decide the next defaults (not in the default steps)
  # 1. cuDNN's two PyTorch-default settings, one at a time: which buys ResNet-50's speed-up
  { echo; echo "ResNet-50 b16 float32, singa graph, per cuDNN setting (SINGA_CUDNN_TF32 / SINGA_CUDNN_DETERMINISTIC):"
    local tf det
    for tf in 0 1; do for det in 1 0; do
      echo; echo "SINGA_CUDNN_TF32=$tf SINGA_CUDNN_DETERMINISTIC=$det:"
      SINGA_CUDNN_TF32=$tf SINGA_CUDNN_DETERMINISTIC=$det PYTHONPATH="$B/py" "$PY" \
        benchmarks/bench_train.py --device gpu --timeout 60 --models resnet50 --batch 16 \
        --iters 10 --modes bfs | grep -E '^\|( model| Cases|---)'
    done; done
    # 2. where the GPT's GPU step goes (the bench step profiles it too, with fewer rows)
    echo; echo "GPT on the GPU with the graph's per-operation profile:"
    PYTHONPATH="$B/py" "$PY" benchmarks/bench_gpt.py --device gpu --iters 10 --timeout 60 \
      --modes graph torch --profile --top 25
  } 2>&1 | tee -a "$OUT/gpu-report.md"
  # 3. the GPU tests under PyTorch's cuDNN settings: what a default change would break
  (cd /tmp && SINGA_CUDNN_TF32=1 SINGA_CUDNN_DETERMINISTIC=0 PYTHONPATH="$B/py" SINGA_EXPECT_CUDA=1 \
     SINGA_REQUIRE_GPU=1 "$PY" -m pytest -q -rfE -p no:cacheprovider -n 6 \
     "$ROOT/tests/python/test_gpu.py" "$ROOT/tests/python/test_gpu_float16.py") \
    >"$OUT/python-gpu-cudnn.log" 2>&1
  echo "GPU tests with SINGA_CUDNN_TF32=1 SINGA_CUDNN_DETERMINISTIC=0: $(tail -n 1 "$OUT/python-gpu-cudnn.log")" \
    | tee -a "$OUT/summary.txt"
  grep -E '^FAILED ' "$OUT/python-gpu-cudnn.log" | head -n 40
  return 0  # measurements: the table and the log are the result
}

pyall() {  # the whole suite against the CUDA build (CPU-only tests may skip), in parallel if xdist
  # -v names each test as it ends, so a run cut short still says which failed; the suite stops
  # 20 s inside the step's limit to leave time for that list. Dry, where a mount namespace can be
  # made, the suite runs without the system's OpenBLAS/oneDNN/GoogleTest/Open MPI, as there.
  local par="" hide=""; "$PY" -c 'import xdist' 2>/dev/null && par="-n ${PYTEST_WORKERS:-14}"
  [ "$DRY" = 1 ] && "$ROOT/tools/hide_system_deps.sh" --can && hide="$ROOT/tools/hide_system_deps.sh"
  # one OpenMP thread per worker: 14 workers of 16 threads each on 16 cores spent the second GPU
  # day's call oversubscribed (95% of the suite in 220 s); the GPU tests (pygpu) keep every core
  (cd /tmp && PYTHONPATH="$B/py" SINGA_EXPECT_CUDA=$CUDA OMP_NUM_THREADS=${PYALL_OMP_THREADS:-1} \
     $hide timeout --kill-after=5 \
     $(( ${STEP_LIMIT:-480} - 20 )) "$PY" -m pytest -v -rfEs -p no:cacheprovider $par \
     --ignore="$ROOT/tests/python/test_gpu.py" --ignore="$ROOT/tests/python/test_gpu_float16.py" \
     "$ROOT/tests/python") >"$OUT/python-all.log" 2>&1
  local rc=$?
  grep -E '(FAILED|ERROR) ' "$OUT/python-all.log" | sed 's/^\[gw[0-9]*\] *//' \
    | sort -u | tee -a "$OUT/summary.txt" | head -n 80
  tail -n 3 "$OUT/python-all.log"; [ $rc -eq 124 ] && echo "the suite ran out of time"
  return $rc
}

# Each step runs in its own bash (for `timeout`), which sees these through the environment.
export DEPS PREFIX DRY LIB B BUILD_PY PY CUDA OUT JOBS ROOT
export -f unpack configure build cpp diag diag_env pygpu bench compile pyall probe
rm -f "$B/.diag-env"
# name:time limit:needs the Python extension:a failure stops the run
# verification before measurement: a slow day cuts the benchmarks' tail, not the suite
for row in unpack:120:0:1 configure:120:0:1 build:"${GPU_BUILD_LIMIT:-330}":0:1 cpp:90:0:0 \
    diag:150:1:0 pygpu:150:1:0 pyall:"${GPU_PYALL_LIMIT:-240}":1:0 \
    bench:"${GPU_BENCH_LIMIT:-260}":1:0 compile:200:1:0 probe:200:1:0; do
  IFS=: read -r s limit needs_py fatal <<<"$row"
  want "$s" || continue
  [ "$needs_py" = 1 ] && [ "$BUILD_PY" != ON ] && continue
  step "$s" "$limit" bash -c "diag_env; $s" || { [ "$fatal" = 1 ] && break; }
done
say "total $(( $(date +%s) - T0 ))s; $( [ $STATUS -eq 0 ] && echo 'ALL PASSED' || echo 'SOME STEPS FAILED')"
exit $STATUS
