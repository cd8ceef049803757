// Device side of an ExpertIndex (kernels.h).
#pragma once

#include <cstdint>

#include "backend/cuda/kernels.h"

namespace ts::cuda {

// Where the input row of GEMV blockIdx.y starts under an index, in elements from x: runs of
// ix.experts_per_x GEMVs (a token's experts) share a row. The division is skipped where it is not
// needed: one token's decode runs it in every block of its expert GEMVs.
__device__ __forceinline__ int64_t expert_x_offset(const ExpertIndex& ix) {
  if (ix.x_stride == 0) return 0;
  const unsigned i = blockIdx.y;
  return static_cast<int64_t>(ix.experts_per_x == 1 ? i : i / ix.experts_per_x) * ix.x_stride;
}

}  // namespace ts::cuda
