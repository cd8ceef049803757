// The memory a run will use, announced at open and checked by the memory gate:
// resident weights + expert slots + KV cache + workspace + the backend's own scratch, and beside
// them the pinned host-RAM tier of a device backend.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json_fwd.hpp>

#include "quant/dtype.h"

namespace ts {

class Backend;
struct ArchConfig;
struct ModelSpec;
struct ScratchPlan;

// The tokens one forward pass processes (a prefill micro-batch) unless --prefill-batch says
// otherwise (default_prefill_batch); decode is the M = 1 case. On the CPU the GEMM streams the
// weights from memory once per micro-batch: 128 rows prefill a dense model faster than 64 did,
// and 256 or 512 are no faster. An MoE model's routed experts each see only batch x top-k
// / n_expert of a micro-batch's rows (8 of 128 on Qwen3-30B-A3B: the k-quant GEMM's break-even),
// so MoE models take 512 on the CPU, where each expert also sees more rows and a streamed one is
// read and packed once per micro-batch; the workspace stays small because the head's logits are
// held for kHeadRows rows only. On a device, where each op is a launch whatever its size, a
// prompt's time at 512 rows is largely reading weights once per micro-batch (each routed expert
// through the grouped kernels, each quantised weight dequantised to f16), so device backends
// take 2048 (llama.cpp's default logical batch too). The runs behind the three:
// docs/history/PERFORMANCE-2026-12.md, "CPU: MoE prompts, the micro-batch and the head", and
// docs/PERFORMANCE.md, "CUDA: prefill".
constexpr int64_t kCpuPrefillBatch = 128;
constexpr int64_t kCpuMoePrefillBatch = 512;
constexpr int64_t kDevicePrefillBatch = 2048;
// The most rows the output head computes logits for at once. A micro-batch that wants every
// row's logits (perplexity) takes the head in chunks of this many, each copied to the caller
// before the next, so the logits buffer (n_vocab floats a row: 0.6 MB on Qwen3's 151,936-entry
// vocabulary) stops growing with the micro-batch. 128 is the dense CPU micro-batch, whose prompts
// still take the head in one matmul with the same bits as before; at 512 the chunks cost a dense
// model's perplexity a little (a quantised head read four times a window instead of once) and
// bought the MoE default of 512 its memory (above; the figures in the same PERFORMANCE.md section).
constexpr int64_t kHeadRows = 128;
// Chunks of one token each that a forward pass treats as a batched decode step: each token's
// experts run as in its own decode (by expert id on the device when they are resident, every
// token's in one matmul_indexed a projection; streamed, grouped on the host, each (token, expert)
// pair as a one-row matmul), so the rows get the same bits whether the experts stream or not. On
// a backend that groups resident experts on the host too (the CPU) an expert's rows stay one group
// either way. Beyond a few tokens, grouping shares the experts' weight reads; up to 8, running
// them by id is faster on a device than grouping, whose expert lists cross to the host every
// layer (docs/PERFORMANCE.md, "Measured choices").
constexpr int64_t kDecodeStepRows = 8;
// Recurrent-state checkpoints a sequence of a hybrid model holds unless told otherwise: one taken
// before a pass of lookup guesses, one where the last prompt or answer ended.
constexpr int64_t kDefaultStateCheckpoints = 2;

struct FootprintRequest {
  int64_t ctx = 4096;
  DType kv_type = DType::F16;
  int64_t expert_slots = 0;  // per MoE layer; 0 or >= n_expert means every expert resident
  int64_t prefill_batch = kCpuPrefillBatch;
  uint64_t ram_budget = 0;  // bytes of pinned host RAM for streamed experts (device backends)
  int64_t state_checkpoints = kDefaultStateCheckpoints;
  const Backend* backend = nullptr;  // asked for its own scratch (none: counted as 0)
};

struct Footprint {
  uint64_t resident = 0;      // non-expert weights (plus every expert when resident)
  uint64_t expert_slots = 0;  // slots x MoE layers x expert stride (streaming only)
  int64_t slots_per_layer = 0;
  bool streaming = false;
  uint64_t kv_cache = 0;         // attention layers' K and V rows
  uint64_t recurrent_state = 0;  // DeltaNet layers' state, with its checkpoints
  uint64_t workspace = 0;        // activations of one micro-batch
  uint64_t backend_scratch = 0;  // what the backend holds for itself (device backends)
  // Not part of total, which is what --memory-budget shares out: pinned host memory that holds
  // whole experts (streaming on a device backend only).
  uint64_t ram_tier = 0;
  int64_t ram_tier_entries = 0;
  // Not part of total either: weights read in place from the file's mapping, a row at a time
  // (Gemma 4's per-layer embeddings); the page cache holds what was read lately.
  uint64_t mapped = 0;
  uint64_t total = 0;
};

// Floats a row of a micro-batch takes in each FFN-wide buffer (gate, up, activation): the widest of
// a dense layer's n_ff and an MoE layer's top-k rows of n_ff_expert, over the layers the model has
// (all of Qwen3-30B-A3B's are MoE: its stated n_ff of 6144 would take 3 x 8 x 6144 floats a row).
int64_t ffn_row_floats(const ArchConfig& c);
// Bytes of one copy of a sequence's recurrent state (every DeltaNet layer's; 0 without any).
uint64_t recurrent_state_bytes(const ArchConfig& c);
// Bytes one position takes in a sequence's KV cache: K and V rows of each attention layer, the
// latent + rope row of each MLA layer.
uint64_t kv_bytes_per_token(const ArchConfig& c, DType kv_type);
// Floats a row of a micro-batch takes in the mixers' buffers beyond the attention's q, k, v and
// output: the output gate, and a DeltaNet layer's projections (runtime/mixers/); and in the
// forward's own extras: Gemma 4's per-layer inputs, an image pass's DeepStack features.
int64_t mixer_row_floats(const ArchConfig& c);
// The micro-batch a run takes unless --prefill-batch says otherwise (see above), never more
// tokens than the context `ctx` (rows past it would only be memory).
int64_t default_prefill_batch(const ArchConfig& c, bool host_backend, int64_t ctx);
// The elements of layer l's attention heads: an MLA layer's heads read one shared row of
// row_width(). widest_attention_head: the largest over the layers.
int64_t attention_head_width(const ArchConfig& c, int64_t l);
int64_t widest_attention_head(const ArchConfig& c);
// The matmuls `spec`'s forward pass runs in micro-batches of up to `prefill_batch` rows, its
// routed experts all at once (resident) or one at a time (streaming).
ScratchPlan scratch_plan(const ModelSpec& spec, int64_t prefill_batch, bool streaming, int64_t ctx);

// Fails (Budget) when req.ram_budget is nonzero but holds no expert.
Footprint compute_footprint(const ModelSpec& spec, const FootprintRequest& req);
// The largest slot count whose footprint fits `budget` bytes; fails (Budget) when even top-k
// slots do not fit, naming each part.
int64_t slots_for_budget(const ModelSpec& spec, FootprintRequest req, uint64_t budget);

nlohmann::json footprint_json(const Footprint& f);
void print_footprint(const Footprint& f, std::FILE* out);

}  // namespace ts
