# Thin wrapper over CMake so that a newcomer needs two commands: `make demo` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# The Python package is built in the same CMake build (no second C++ build) with a virtualenv's Python
# that holds the pinned tools of python/requirements-dev.txt; its tests run against that build.
VENV ?= .venv
PYTHON3 ?= python3
PYTHON_PKG ?= ON
PY := $(abspath $(VENV))/bin/python
ifeq ($(PYTHON_PKG),ON)
PY_FLAGS := -DGEARSHIFT_BUILD_PYTHON=ON -DPython_EXECUTABLE=$(PY)
PY_DEPS := venv
else
PY_FLAGS := -DGEARSHIFT_BUILD_PYTHON=OFF
PY_DEPS :=
endif

.PHONY: all demo test configure build asan tsan clean venv pytest pip-check

all: build

venv: $(VENV)/.ok
$(VENV)/.ok: python/requirements-dev.txt
	$(PYTHON3) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check -r python/requirements-dev.txt
	touch $@

# Unity build (each target's .cpp files compiled in batches): a clean `make demo` compiled 517 s of CPU, mostly the
# same fmt/nlohmann-json templates again in every file; 288 s in batches (issue 48). Tests stay one file a unit.
UNITY ?= ON
configure: $(PY_DEPS)
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DGEARSHIFT_UNITY_BUILD=$(UNITY) $(PY_FLAGS) $(CMAKE_FLAGS) > /dev/null

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The main job on the embedded GPT-3 XL H200 trace: no arguments, no GPU. Builds only the CLI (and what it links):
# the tests and benchmarks wait for `make test` (issue 48: a newcomer's first command built all 344 targets).
demo: configure
	cmake --build $(BUILD) -j $(JOBS) --target gearshift
	$(BUILD)/src/cli/gearshift demo

# Build and run every test: CTest runs the GoogleTest suites, pytest the Python package's.
test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
ifeq ($(PYTHON_PKG),ON)
	$(MAKE) pytest
endif

pytest:
	PYTHONPATH=$(abspath $(BUILD))/python $(PY) -m pytest -q -p no:cacheprovider python/tests

# `pip install .` into a fresh virtualenv and the 600 J window check through it (compiles the core again).
pip-check: venv
	GEARSHIFT_TEST_PIP_INSTALL=1 $(PY) -m pytest -q -p no:cacheprovider python/tests/test_pip_install.py

# The suite under AddressSanitizer + UBSan, and under ThreadSanitizer (threaded parts). The Python extension
# is left out there (a sanitized extension needs the sanitizer runtime preloaded into Python).
asan:
	$(MAKE) test BUILD=build-asan PYTHON_PKG=OFF CMAKE_FLAGS="-DGEARSHIFT_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGEARSHIFT_BUILD_BENCHMARKS=OFF"
tsan:
	$(MAKE) test BUILD=build-tsan PYTHON_PKG=OFF CMAKE_FLAGS="-DGEARSHIFT_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGEARSHIFT_BUILD_BENCHMARKS=OFF"

clean:
	rm -rf build build-asan build-tsan $(VENV)
