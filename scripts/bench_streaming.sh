#!/usr/bin/env bash
# Decode speed of a model streamed from disk, from a cold page cache: drops the page cache (needs
# root), then runs `turbospark bench` with a memory budget. bench prints t/s, the expert bytes read
# per token, the disk's O_DIRECT read rate measured in the same run and the decode's average read
# rate (t/s x bytes per token) as a fraction of it. Extra arguments go to bench (e.g.
# --expert-prefetch, --cache-policy flru, --expert-io buffered).
#   scripts/bench_streaming.sh MODEL.gguf [BUDGET] [bench flags...]
# Environment: TURBOSPARK (the binary, default build/turbospark), N (tokens generated, default 32).
set -euo pipefail
model=${1:?usage: scripts/bench_streaming.sh MODEL.gguf [BUDGET] [bench flags...]}
budget=${2:-12G}
shift $(($# >= 2 ? 2 : 1))
bin=${TURBOSPARK:-build/turbospark}
sync
echo 3 >/proc/sys/vm/drop_caches
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin" bench -m "$model" --memory-budget "$budget" -p 0 -n "${N:-32}" -r 1 "$@"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
