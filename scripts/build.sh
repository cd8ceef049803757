#!/usr/bin/env bash
# Configures and builds turbospark into build/ (Release).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/configure.sh build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j2
