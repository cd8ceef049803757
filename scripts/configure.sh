#!/usr/bin/env bash
# Configures build/ the same way for scripts/build.sh and scripts/test.sh (one build serves both).
# CUDA code is compiled whenever nvcc exists: for the local GPU's architecture, or, on a machine
# without one, for TURBOSPARK_CUDA_ARCHS (default Hopper, "90"; e.g. "80;89;90" for every card we
# support, which is also what a plain `cmake` configure picks).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
dir=${1:-build}
shift || true
args=(-G Ninja)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  args+=("-DCMAKE_CUDA_ARCHITECTURES=native")
else
  args+=("-DCMAKE_CUDA_ARCHITECTURES=${TURBOSPARK_CUDA_ARCHS:-90}")
fi
cmake -S . -B "$dir" "${args[@]}" "$@" >/dev/null
