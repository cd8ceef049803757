// A file's kernels compiled for one x86 instruction set: TS_ISA_BEGIN("avx2,fma") before them
// (and before including any header whose inline kernels they instantiate), TS_ISA_END() after.
// The rest of the program keeps the baseline, so a CPU without the set never meets these
// instructions: the dispatch checks the CPU first (matmul_kernels.cpp).
//
// Between the two, GCC's -Wuninitialized is off: GCC 12's AVX-512 intrinsics start from
// _mm512_undefined_*(), which it flags (GCC bug 105593, fixed in 13).
#pragma once

#define TS_ISA_PRAGMA(x) _Pragma(#x)

#if defined(__clang__)
#define TS_ISA_BEGIN(isa) \
  TS_ISA_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define TS_ISA_END() TS_ISA_PRAGMA(clang attribute pop)
#else
#define TS_ISA_BEGIN(isa)                                 \
  TS_ISA_PRAGMA(GCC push_options)                         \
  TS_ISA_PRAGMA(GCC target(isa))                          \
  TS_ISA_PRAGMA(GCC diagnostic push)                      \
  TS_ISA_PRAGMA(GCC diagnostic ignored "-Wuninitialized") \
  TS_ISA_PRAGMA(GCC diagnostic ignored "-Wmaybe-uninitialized")
#define TS_ISA_END()                \
  TS_ISA_PRAGMA(GCC diagnostic pop) \
  TS_ISA_PRAGMA(GCC pop_options)
#endif
