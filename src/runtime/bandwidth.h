// Measured machine bounds for the roofline figures of `turbospark bench`: the memory read
// bandwidth a decode step can at best stream weights at, and the arithmetic peak a prefill can at
// best compute at. Both are measured in-process with the thread count the engine uses.
#pragma once

#include <cstdint>

namespace ts {

struct ReadBandwidth {
  double bytes_per_s = 0;  // best pass
  uint64_t buffer_bytes = 0;
  int threads = 0;
  int runs = 0;
};

// Each thread sums its contiguous slice of one buffer far larger than the last-level cache with
// the widest vector loads the CPU has; the figure is bytes / wall time of the best of `runs`
// passes. buffer_bytes 0: max(1 GiB, 2 x the reported L3), at most a quarter of the RAM.
ReadBandwidth measure_read_bandwidth(int threads, uint64_t buffer_bytes = 0, int runs = 10);

struct ComputePeak {
  double f32_flops = 0;     // f32 FMA, widest vectors (one FMA = 2 flops)
  double int8_ops = 0;      // u8 x s8 dot products into int32, widest vectors (one MAC = 2 ops)
  double int8_ops_256 = 0;  // the same on 256-bit vectors (what AVX2 / AVX512-VL kernels can reach)
  const char* f32_isa = "";
  const char* int8_isa = "";
  int threads = 0;
};

// Every thread runs independent chains of FMA (f32) and of int8 dot-product instructions
// (AVX512-VNNI vpdpbusd, else AVX-VNNI, else AVX2 maddubs + madd) on registers, long enough to
// amortise the start; the best of five passes of about 0.1 s.
ComputePeak measure_compute_peak(int threads);
// `peak` probed again (after a benchmark's tests), each rate the higher of the two probes: a
// shared VM's speed moves from minute to minute (its int8 peak by more than half in runs minutes
// apart: docs/PERFORMANCE.md, "Machines and method"), and a probe taken in a slow phase would
// flatter every arithmetic-bound fraction.
void reprobe_compute_peak(ComputePeak& peak);

}  // namespace ts
