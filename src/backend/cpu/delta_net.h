// Gated DeltaNet on the CPU (Backend::conv_silu, Backend::delta_rule): the exact recurrent form,
// one row after another. Its arithmetic is O(heads x k_head_dim x v_head_dim) a row, a few
// percent of a layer's projections, so the CPU runs prefill through it too and prefill equals
// decode bit for bit. (A chunked form pays on tensor cores; docs/HYBRID.md says what it needs.)
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "core/thread_pool.h"

namespace ts::cpu {

// Channels [c0, c1) of the causal depthwise convolution + SiLU over M rows (see Backend).
void conv_silu_channels(float* x, int64_t M, int64_t channels, const float* taps, int64_t kernel,
                        float* window, int64_t c0, int64_t c1);

// Value heads [h0, h1) of the gated delta rule over M rows (see Backend::delta_rule), on the
// active instruction set (delta_net_body.h); the _avx2 / _avx512 ones need that set.
void delta_rule_heads(const float* qkv, const float* beta, const float* alpha, int64_t M,
                      const DeltaRuleArgs& a, float* state, float* out, int64_t h0, int64_t h1);
void delta_rule_heads_avx2(const float* qkv, const float* beta, const float* alpha, int64_t M,
                           const DeltaRuleArgs& a, float* state, float* out, int64_t h0,
                           int64_t h1);
void delta_rule_heads_avx512(const float* qkv, const float* beta, const float* alpha, int64_t M,
                             const DeltaRuleArgs& a, float* state, float* out, int64_t h0,
                             int64_t h1);

}  // namespace ts::cpu
