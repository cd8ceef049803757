#!/usr/bin/env bash
# Builds the Debian package: DIR/package/turbospark_VERSION_ARCH.deb (DIR: build by default) with
# the binary, the CUDA plugin when nvcc is found, and the bundled model. Install it with
#   sudo apt-get install ./build/package/turbospark_*.deb
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
scripts/configure.sh "$dir" -DCMAKE_BUILD_TYPE=Release
cmake --build "$dir" -j2 --target turbospark
cpack --config "$dir/CPackConfig.cmake" -B "$PWD/$dir/package" >/dev/null
ls "$dir"/package/turbospark_*.deb
