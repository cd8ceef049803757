#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz/ and runs each for N seconds (default 30):
#   scripts/fuzz.sh [seconds]
# New inputs are kept in build-fuzz/fuzz/work/<target>/, crashes as build-fuzz/fuzz/work/<target>-crash-*,
# the output in build-fuzz/fuzz/work/<target>.log.
# The committed seeds (fuzz/corpus/) are only read; `fuzz_make_seeds DIR SHARED_DIR` regenerates them.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
scripts/bootstrap.sh
if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found (apt-get install clang)" >&2
  exit 1
fi
dir=build-fuzz
cmake -S . -B $dir -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_COMPILER=clang -DTURBOSPARK_FUZZ=ON -DTURBOSPARK_CUDA=OFF -DTURBOSPARK_BENCH=OFF >/dev/null
targets="gguf safetensors hf_index spm_tokenizer hf_tokenizer api_request http_request json_prefix json_schema chat_template model_config tool_calls"
cmake --build $dir -j2 --target $(printf "fuzz_%s " $targets)
work=$dir/fuzz/work
status=0
for target in $targets; do
  mkdir -p $work/$target
  echo "== fuzz_$target for ${seconds}s"
  log=$work/$target.log
  dict=""  # a target without a dictionary of its own runs without one
  [ -f fuzz/$target.dict ] && dict=-dict=fuzz/$target.dict
  if $dir/fuzz/fuzz_$target -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
      -print_final_stats=1 $dict -artifact_prefix=$work/$target- \
      $work/$target fuzz/corpus/$target >"$log" 2>&1; then
    grep -E "^(#[0-9]+ +DONE|Done|stat::number_of_executed_units|stat::peak_rss_mb)" "$log"
  else
    tail -n 40 "$log"
    echo "fuzz_$target FAILED (log: $log)" >&2
    status=1
  fi
done
exit $status
