// The gated activation of one element, the one expression of the GLU kernels (elementwise.cu) and
// of the routed experts' down projection that applies it as it loads its input (gemv.cu), so
// that both give the same bits.
#pragma once

#include "backend/backend.h"

namespace ts::cuda {

// act(g) * u.
template <Glu A>
__device__ __forceinline__ float glu_unit(float g, float u) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  if constexpr (A == Glu::SiLU) {
    return g / (1.0f + expf(-g)) * u;
  } else {  // GELU with the tanh approximation, as PyTorch's gelu(approximate='tanh')
    return 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * u;
  }
}

}  // namespace ts::cuda
