#!/usr/bin/env bash
# The test command: builds everything and runs every test except the slow and GPU-only ones.
# TURBOSPARK_SANITIZE=ON runs the same suite under AddressSanitizer + UBSan (in build-asan/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
if [ "${TURBOSPARK_SANITIZE:-OFF}" = "ON" ]; then
  dir=build-asan
  cmake -S . -B $dir -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTURBOSPARK_SANITIZE=ON >/dev/null
else
  dir=build
  cmake -S . -B $dir -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build $dir -j2
cd $dir
ctest --output-on-failure -j2 -LE "slow|cuda"
