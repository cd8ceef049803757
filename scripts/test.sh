#!/usr/bin/env bash
# The test command: builds everything and runs every test except the slow and GPU-only ones.
# TURBOSPARK_SANITIZE=ON runs the same suite under AddressSanitizer + UBSan (in build-asan/).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${TURBOSPARK_SANITIZE:-OFF}" = "ON" ]; then
  dir=build-asan
  scripts/configure.sh $dir -DCMAKE_BUILD_TYPE=Debug -DTURBOSPARK_SANITIZE=ON -DTURBOSPARK_BENCH=OFF
else
  dir=build
  scripts/configure.sh $dir -DCMAKE_BUILD_TYPE=Release
fi
cmake --build $dir -j2
cd $dir
ctest --output-on-failure -j2 -LE "slow|cuda"
