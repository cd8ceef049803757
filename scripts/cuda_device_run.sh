#!/usr/bin/env bash
# Builds the CUDA backend's tests and benchmark on the GPU machine and runs them, logs under $OUT.
# The GPU machine's image has CUDA, CMake and ninja but none of the Debian development packages the
# build needs, and it cannot install any. So, on a development machine (Debian, packages installed
# by scripts/bootstrap.sh), first collect them into the ignored folder .devdeps:
#
#   scripts/cuda_device_run.sh --collect-deps
#
# then carry .devdeps with the device tool's run and call scripts/cuda_device_run.sh [--quick]
# there (--quick: one GEMV shape, for a fast check).
#
# Building there costs minutes of device time per call. The binaries built here (Debian 12, glibc
# 2.36) run there too, so the cheaper way is to build here and carry only them:
#
#   scripts/cuda_device_run.sh --pack build-dir   (writes the ignored .gpubin: bin.txz, ~10 MB,
#                                                  and the data files $DATA names, see below)
#
# then carry .gpubin and call scripts/cuda_device_run.sh --prebuilt there: every cuda test program
# ($TESTS: which ones), the GEMV bench and `turbospark bench` on $SHAPES (one sequence, and eight
# decoding together; SHAPES="": none), in about a minute. To compare builds in one run, add other plugins to the archive and point
# TURBOSPARK_CUDA_PLUGIN at each in turn.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--pack" ]; then
  # The binaries, stripped, and the shared libraries turbospark needs that the GPU image lacks, as
  # one compressed archive: uncompressed they and the tracked tree pass the device tool's 64 MiB
  # (xz: gzip's archive passed it too, with the tracked tree at 39 MB).
  set -e
  b=${2:?usage: --pack BUILD_DIR}
  stage=$(mktemp -d)
  mkdir -p "$stage/lib"
  cp $b/turbospark $b/libturbospark_cuda.so $b/tests/test_cuda_* $b/bench/bench_cuda_gemv "$stage/"
  rm -f "$stage"/*.cmake
  strip "$stage"/turbospark "$stage"/libturbospark_cuda.so "$stage"/test_cuda_* "$stage"/bench_cuda_gemv
  # The NCCL communicator where the build has one (libnccl itself comes from the GPU image's
  # toolkit; without it the cuda-multi tests skip, saying so).
  if [ -f $b/libturbospark_nccl.so ]; then
    cp $b/libturbospark_nccl.so "$stage/"
    strip "$stage"/libturbospark_nccl.so
  fi
  for l in libedit.so.2 libcpp-httplib.so.0.11 libbsd.so.0 libmd.so.0 libssl.so.3 libcrypto.so.3 \
    libbrotlidec.so.1 libbrotlienc.so.1 libbrotlicommon.so.1 libpcre2-8.so.0 libtinfo.so.6 \
    libpng16.so.16 libjpeg.so.62 libwebp.so.7 libz.so.1 liburing.so.2; do
    cp -L /lib/x86_64-linux-gnu/$l "$stage/lib/"
  done
  rm -rf .gpubin
  mkdir -p .gpubin
  # xz -9's 64 MiB window finds the CUDA fat binary that every test program links again: the
  # archive is a quarter of what the default level writes.
  tar cf - -C "$stage" . | xz -9 -T2 -c >.gpubin/bin.txz
  rm -rf "$stage"
  # Data the repository does not keep: $DATA lists files by their path inside the data folder
  # the build was configured with (TURBOSPARK_SHARED_DIR), e.g. DATA="fixtures/gpt_oss/meta.json
  # fixtures/gpt_oss/model-f32.gguf fixtures/gpt_oss/ref_logits.f32" (the device tool carries 64
  # MiB with the tracked tree: a few files at a time). On the device that folder's path leads to
  # them; tests whose files are not there skip.
  data_dir=$(sed -n 's/^TURBOSPARK_SHARED_DIR:PATH=//p' "$b/CMakeCache.txt")
  sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$b/CMakeCache.txt" >.gpubin/source_dir
  echo "$data_dir" >.gpubin/data_dir
  for f in ${DATA:-}; do
    [ -n "$data_dir" ] && [ -f "$data_dir/$f" ] || { echo "not in the data folder: $f" >&2; exit 2; }
    mkdir -p ".gpubin/data/$(dirname "$f")"
    cp "$data_dir/$f" ".gpubin/data/$f"
  done
  du -sh .gpubin
  exit 0
fi
if [ "${1:-}" = "--prebuilt" ]; then
  out=${OUT:-out}
  mkdir -p "$out"
  B=$(mktemp -d)
  tar xJf .gpubin/bin.txz -C "$B"
  export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
  # The tests find their fixtures at the absolute paths of the checkout they were built in and
  # of its data folder.
  src=$(cat .gpubin/source_dir) data_dir=$(cat .gpubin/data_dir)
  [ -e "$src" ] || { mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; }
  [ -z "$data_dir" ] || [ -e "$data_dir" ] || [ ! -d .gpubin/data ] ||
    { mkdir -p "$(dirname "$data_dir")" && ln -s "$PWD/.gpubin/data" "$data_dir"; }
  # ...and the tests that run the binary (test_cuda_memory) at the build folder's.
  mkdir -p build && cp $B/turbospark $B/libturbospark_cuda.so build/
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
  $B/test_cuda_ops --gtest_list_tests >/dev/null 2>&1 ||
    { echo "prebuilt binaries do not run here:"; ldd $B/turbospark | grep "not found"; exit 1; }
  start=$(date +%s)
  for t in $(cd "$B" && ls ${TESTS:-test_cuda_*}); do
    timeout 200 $B/$t >"$out/$t.log" 2>&1
    echo "$t rc=$? $(( $(date +%s) - start )) s"
    grep -E "FAILED|Failure|PASSED" "$out/$t.log" | head -20
  done
  timeout 120 $B/bench_cuda_gemv --quick 2>&1 | tee "$out/gemv.log" | grep -E "copy|bf16|q8_0|q4_k|q6_k"
  for spec in ${SHAPES-llama3-8b:q8_0:8 qwen3-30b-a3b:bf16:12}; do
    IFS=: read -r shape dtype layers <<<"$spec"
    f=/tmp/$shape-$dtype-$layers.gguf
    $B/turbospark synth --shape "$shape" --dtype "$dtype" --layers "$layers" -o "$f" -t 16 \
      >/dev/null 2>&1 || { echo "synth $spec failed"; continue; }
    $B/turbospark bench -m "$f" --backend cuda -p 512 -n 128 -r 3 2>&1 | tee -a "$out/bench.log"
    # The server's batched decode: eight sequences a step.
    $B/turbospark bench -m "$f" --backend cuda -p 0 -n 64 -r 3 --parallel 8 2>&1 |
      grep -E "\| tg" | tee -a "$out/bench.log"
    [ "$shape" = qwen3-30b-a3b ] && $B/turbospark bench -m "$f" --backend cuda -p 512 -n 128 -r 3 \
      --expert-slots 32 2>&1 | tee -a "$out/bench.log"
    rm -f "$f"
  done
  echo "total $(( $(date +%s) - start )) s"
  exit 0
fi
if [ "${1:-}" = "--collect-deps" ]; then
  # Headers, static or shared libraries, CMake configs and pkg-config files of the build's
  # dependencies, relocated under .devdeps/usr (their .pc prefixes made relative to the file).
  set -e
  d=.devdeps/usr
  lib=/usr/lib/x86_64-linux-gnu
  rm -rf .devdeps
  mkdir -p $d/bin $d/include/x86_64-linux-gnu $d/lib/x86_64-linux-gnu/pkgconfig $d/lib/x86_64-linux-gnu/cmake \
    $d/lib/rlink $d/share/cmake
  cp -r /usr/include/{gtest,gmock,benchmark,nlohmann,CLI,editline,openssl,brotli} $d/include/
  cp /usr/include/{pcre2.h,histedit.h,httplib.h,zlib.h,zconf.h} $d/include/
  cp -r /usr/include/x86_64-linux-gnu/openssl $d/include/x86_64-linux-gnu/
  cp $lib/{libgtest,libgtest_main,libgmock,libgmock_main,libbenchmark_main,libpcre2-8}.a $d/lib/x86_64-linux-gnu/
  cp -P $lib/libbenchmark.so* $lib/libedit.so* $lib/libcpp-httplib.so* $d/lib/x86_64-linux-gnu/
  cp -P /lib/x86_64-linux-gnu/{libbsd.so.0*,libmd.so.0*} $d/lib/x86_64-linux-gnu/
  cp -L /lib/x86_64-linux-gnu/libpkgconf.so.3 $d/lib/x86_64-linux-gnu/
  cp -L /lib/x86_64-linux-gnu/{libssl.so.3,libcrypto.so.3,libz.so.1} $lib/libbrotli{dec,enc,common}.so.1 $d/lib/rlink/
  cp -r $lib/cmake/{GTest,benchmark} $d/lib/x86_64-linux-gnu/cmake/
  cp -r /usr/share/cmake/{nlohmann_json,CLI11} $d/share/cmake/
  cp /usr/bin/pkgconf $d/bin/pkg-config
  for pc in libpcre2-8 libedit; do
    sed -e 's|^prefix=.*|prefix=${pcfiledir}/../../..|' $lib/pkgconfig/$pc.pc >$d/lib/x86_64-linux-gnu/pkgconfig/$pc.pc
  done
  # cpp-httplib without Requires.private: the OpenSSL/zlib/brotli .pc files are not carried.
  sed -e 's|^prefix=.*|prefix=${pcfiledir}/../../..|' -e '/^Requires.private/d' \
    -e 's|^Cflags: -I${includedir}|Cflags: -I${includedir} -I${includedir}/x86_64-linux-gnu|' \
    $lib/pkgconfig/cpp-httplib.pc >$d/lib/x86_64-linux-gnu/pkgconfig/cpp-httplib.pc
  du -sh .devdeps
  exit 0
fi
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
export LD_LIBRARY_PATH=${run_path:-${LD_LIBRARY_PATH:-}}
if [ "${1:-}" = "--e2e" ]; then
  # End to end: every ctest of label cuda, then `turbospark bench` on synthetic models of real
  # shapes (SHAPES="shape:dtype:layers ...", default below) with the CUDA backend.
  shift
  cmake --build $build -j16 --target turbospark test_cuda_ops test_cuda_fixtures test_cuda_memory bench_cuda_gemv >"$out/build.log" 2>&1 ||
    { grep -E "error|FAILED" -A5 "$out/build.log" | head -60; exit 1; }
  echo "build: $(( $(date +%s) - start )) s"
  (cd $build && ctest -L cuda --output-on-failure 2>&1 | tail -40 | tee "$out/ctest.log")
  $build/bench/bench_cuda_gemv --quick 2>&1 | tail -30 | tee "$out/gemv.log"
  for spec in ${SHAPES:-llama3-8b:bf16:8 llama3-8b:q8_0:8 qwen3-30b-a3b:bf16:12}; do
    IFS=: read -r shape dtype layers <<<"$spec"
    f=/tmp/$shape-$dtype-$layers.gguf
    $build/turbospark synth --shape "$shape" --dtype "$dtype" --layers "$layers" -o "$f" -t 16 >/dev/null 2>&1 || continue
    $build/turbospark bench -m "$f" --backend cuda -p 512 -n 128 -r 3 "$@" 2>&1 | tee -a "$out/bench.log"
    [ "$shape" = qwen3-30b-a3b ] && $build/turbospark bench -m "$f" --backend cuda -p 512 -n 128 -r 3 \
      --expert-slots 32 2>&1 | tee -a "$out/bench.log"
    rm -f "$f"
  done
  exit 0
fi
cmake --build $build -j16 --target test_cuda_ops bench_cuda_gemv >"$out/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A5 "$out/build.log" | head -60; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
$build/tests/test_cuda_ops 2>&1 | tee "$out/test.log" | grep -vE "^\[ +(RUN|OK) +\]"
$build/bench/bench_cuda_gemv "$@" 2>&1 | tee "$out/bench.log"
