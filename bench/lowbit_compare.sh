#!/usr/bin/env bash
# Decode and prompt speed of each low-bit type, turbospark beside llama.cpp on the same file:
# for each type, synth_lowbit.py turns SRC (a `turbospark synth` GGUF, e.g. llama3.2-1b q8_0) into
# random blocks of that type in DIR, both benchmarks run on it, and the file is deleted.
#
#   GGUF_PY=<llama.cpp>/gguf-py LLAMA_BENCH=<llama-bench> bench/lowbit_compare.sh TURBOSPARK SRC DIR \
#     [types...]
# Env: THREADS (2), PP (64), TG (32), REPS (3); F32=1 also runs turbospark with
# TURBOSPARK_ACTS=f32 (the rows decoded to f32: the low-bit kernels before the int8 ones).
set -euo pipefail
ts=$1 src=$2 dir=$3
shift 3
types=${*:-iq1_s iq1_m iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s tq1_0 tq2_0}
here=$(cd "$(dirname "$0")" && pwd)
t=${THREADS:-2} pp=${PP:-64} tg=${TG:-32} reps=${REPS:-3}
for ty in $types; do
  f=$dir/lowbit-$ty.gguf
  PYTHONPATH=$GGUF_PY python3 "$here/synth_lowbit.py" "$src" "$f" "$ty"
  echo "== $ty, load: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$ts" bench -m "$f" -p "$pp" -n "$tg" -r "$reps" -t "$t" --roofline 2>&1 | grep -E "^\| lowbit|^bounds"
  if [ "${F32:-0}" = 1 ]; then
    echo "TURBOSPARK_ACTS=f32:"
    TURBOSPARK_ACTS=f32 "$ts" bench -m "$f" -p "$pp" -n "$tg" -r "$reps" -t "$t" 2>&1 | grep -E "^\| lowbit"
  fi
  if [ -n "${LLAMA_BENCH:-}" ]; then
    "$LLAMA_BENCH" -m "$f" -p "$pp" -n "$tg" -r "$reps" -t "$t" 2>&1 | grep -E " (pp|tg)[0-9]+ "
  fi
  rm -f "$f"
done
