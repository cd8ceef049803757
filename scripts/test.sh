#!/usr/bin/env bash
# The test command: builds everything and runs every test except the slow and GPU-only ones.
# TURBOSPARK_SANITIZE=ON runs the same suite under AddressSanitizer + UBSan (in build-asan/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
args=(-G Ninja)
# CUDA code is compiled whenever nvcc exists; one architecture (the local GPU's, or Hopper's when
# there is none) keeps the build short. scripts/build.sh builds for sm_80, sm_89 and sm_90.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  args+=(-DCMAKE_CUDA_ARCHITECTURES=native)
else
  args+=(-DCMAKE_CUDA_ARCHITECTURES=90)
fi
if [ "${TURBOSPARK_SANITIZE:-OFF}" = "ON" ]; then
  dir=build-asan
  args+=(-DCMAKE_BUILD_TYPE=Debug -DTURBOSPARK_SANITIZE=ON)
else
  dir=build-test
  args+=(-DCMAKE_BUILD_TYPE=Release)
fi
cmake -S . -B "$dir" "${args[@]}" >/dev/null
cmake --build "$dir" -j2
cd "$dir"
ctest --output-on-failure -j2 -LE "slow|cuda"
