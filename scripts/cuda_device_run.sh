#!/usr/bin/env bash
# Builds the CUDA backend's tests and benchmark on the GPU machine and runs them, logs under $OUT.
# The GPU machine's image has CUDA, CMake and ninja but not the Debian development packages the
# build needs; when .devdeps/usr holds them (headers, static libraries, CMake configs and
# pkg-config copied from a development machine, see docs), they are used from there.
#
#   scripts/cuda_device_run.sh [--quick]    (--quick: one GEMV shape, for a fast check)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}
mkdir -p "$out"
deps=$PWD/.devdeps/usr
if [ -d "$deps" ]; then
  export PATH=$deps/bin:$PATH
  export CMAKE_PREFIX_PATH=$deps
  export PKG_CONFIG_PATH=$deps/lib/x86_64-linux-gnu/pkgconfig
  export CXXFLAGS="-isystem $deps/include"
  export LD_LIBRARY_PATH=$deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  # Libraries that the carried shared libraries need (OpenSSL, zlib, brotli for cpp-httplib): found
  # by the linker, and put on the library path only for the programs built here, never for cmake.
  export LDFLAGS="-Wl,-rpath-link,$deps/lib/rlink"
  run_path=$deps/lib/rlink:$LD_LIBRARY_PATH
fi
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee "$out/gpu.txt"
build=build-gpu
cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTURBOSPARK_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DTURBOSPARK_BENCH=ON >"$out/configure.log" 2>&1 ||
  { tail -40 "$out/configure.log"; exit 1; }
start=$(date +%s)
cmake --build $build -j16 --target test_cuda_ops bench_cuda_gemv >"$out/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A5 "$out/build.log" | head -60; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
export LD_LIBRARY_PATH=${run_path:-${LD_LIBRARY_PATH:-}}
$build/tests/test_cuda_ops 2>&1 | tee "$out/test.log" | grep -vE "^\[ +(RUN|OK) +\]"
$build/bench/bench_cuda_gemv "$@" 2>&1 | tee "$out/bench.log"
