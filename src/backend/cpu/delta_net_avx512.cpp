// The delta rule (delta_net_body.h) compiled for AVX-512.

// The standard headers the kernel uses come first: an inline library function compiled inside
// the target region below could be picked by the linker for code that runs on any CPU.
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cpu/delta_net.h"
#include "backend/cpu/isa_target.h"

TS_ISA_BEGIN("avx2,fma,avx512f")

#define TS_DELTA_NET_NS avx512
#include "backend/cpu/delta_net_body.h"

namespace ts::cpu {

void delta_rule_heads_avx512(const float* qkv, const float* beta, const float* alpha, int64_t M,
                             const DeltaRuleArgs& a, float* state, float* out, int64_t h0,
                             int64_t h1) {
  avx512::delta_rule_heads(qkv, beta, alpha, M, a, state, out, h0, h1);
}

}  // namespace ts::cpu

TS_ISA_END()
