# Thin wrapper over CMake so that a newcomer needs two commands: `make demo` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all demo test configure build asan tsan clean

all: build

configure:
	@test -f $(BUILD)/build.ninja || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The main job on the embedded GPT-3 XL H200 trace: no arguments, no GPU.
demo: build
	$(BUILD)/src/cli/gearshift demo

# Build and run every test (CTest runs the GoogleTest suites).
test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The suite under AddressSanitizer + UBSan, and under ThreadSanitizer (threaded parts).
asan:
	$(MAKE) test BUILD=build-asan CMAKE_FLAGS="-DGEARSHIFT_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGEARSHIFT_BUILD_BENCHMARKS=OFF"
tsan:
	$(MAKE) test BUILD=build-tsan CMAKE_FLAGS="-DGEARSHIFT_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGEARSHIFT_BUILD_BENCHMARKS=OFF"

clean:
	rm -rf build build-asan build-tsan
