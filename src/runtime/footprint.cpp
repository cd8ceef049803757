#include "runtime/footprint.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "core/checked.h"
#include "core/error.h"
#include "model/model_spec.h"
#include "runtime/media_rows.h"
#include "runtime/mixers/delta_net_mixer.h"
#include "runtime/mixers/mla_mixer.h"
#include "runtime/per_layer_inputs.h"

namespace ts {
namespace {

int64_t moe_layers(const ArchConfig& c) {
  return std::count(c.layer_moe.begin(), c.layer_moe.end(), 1);
}

double mib(uint64_t b) {
  return static_cast<double>(b) / (1 << 20);
}

MatmulShape shape_of(const TensorRef& t) {
  return {t.dtype, t.rows(), t.cols()};
}

// The parts, and the one weight they make when the engine (Engine::load_stacked) or the expert
// store (ExpertStore::view) may stack them: same type, same row length, same bytes a row.
void add_stackable(std::vector<MatmulShape>& out, const std::vector<MatmulShape>& parts,
                   const std::vector<uint64_t>& row_bytes) {
  out.insert(out.end(), parts.begin(), parts.end());
  MatmulShape stacked = parts[0];
  stacked.rows = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].dtype != stacked.dtype || parts[i].cols != stacked.cols ||
        row_bytes[i] != row_bytes[0])
      return;
    stacked.rows += parts[i].rows;
  }
  out.push_back(stacked);
}

uint64_t bytes_per_row(const TensorRef& t) {
  return t.nbytes / static_cast<uint64_t>(t.rows());
}

}  // namespace

int64_t ffn_row_floats(const ArchConfig& c) {
  const bool dense_layers = moe_layers(c) < c.n_layer || c.moe_dense_beside;
  return std::max(
      {dense_layers ? c.n_ff : 0, c.is_moe() ? c.n_expert_used * c.n_ff_expert : 0, c.n_ff_shared});
}

uint64_t kv_bytes_per_token(const ArchConfig& c, DType kv_type) {
  // K and V rows of each attention layer that holds its own (a layer sharing another's holds
  // none), of its own width.
  uint64_t bytes = 0;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    if (c.layer_mixer[static_cast<size_t>(l)] != MixerKind::Attention || !c.holds_kv(l)) continue;
    const uint64_t kv_row = row_bytes(
        kv_type, static_cast<uint64_t>(c.n_head_kv_of(l) * c.head_dim_of(l)), "KV cache row");
    bytes = checked_add(bytes, checked_mul(2, kv_row, "KV row"), "KV row");
  }
  if (c.has_mixer(MixerKind::Mla)) {
    const auto mla_layers = static_cast<uint64_t>(
        std::count(c.layer_mixer.begin(), c.layer_mixer.end(), MixerKind::Mla));
    const uint64_t mla_row =
        row_bytes(kv_type, static_cast<uint64_t>(c.mla.row_width()), "MLA cache row");
    bytes = checked_add(bytes, checked_mul(mla_layers, mla_row, "MLA row"), "KV row");
  }
  return bytes;
}

uint64_t recurrent_state_bytes(const ArchConfig& c) {
  if (!c.has_mixer(MixerKind::DeltaNet)) return 0;
  const auto layers = static_cast<uint64_t>(
      std::count(c.layer_mixer.begin(), c.layer_mixer.end(), MixerKind::DeltaNet));
  return checked_mul(checked_mul(layers, static_cast<uint64_t>(c.delta.state_floats()), "state"),
                     sizeof(float), "recurrent state");
}

int64_t mixer_row_floats(const ArchConfig& c) {
  const int64_t gate = c.attn_output_gate ? c.n_head * c.head_dim : 0;
  // Gemma 4: the per-layer inputs, and the routed branch's input and output beside a dense FFN.
  const int64_t gemma4 = PerLayerInputs::row_floats(c) + (c.moe_dense_beside ? 2 * c.n_embd : 0);
  return gate + (c.has_mixer(MixerKind::DeltaNet) ? DeltaNetMixer::row_floats(c.delta) : 0) +
         (c.has_mixer(MixerKind::Mla) ? MlaMixer::row_floats(c) : 0) + gemma4 +
         MediaRows::row_floats(c);
}

int64_t default_prefill_batch(const ArchConfig& c, bool host_backend, int64_t ctx) {
  const int64_t batch = !host_backend ? kDevicePrefillBatch
                        : c.is_moe()  ? kCpuMoePrefillBatch
                                      : kCpuPrefillBatch;
  return std::min(batch, ctx);
}

int64_t attention_head_width(const ArchConfig& c, int64_t l) {
  return c.layer_mixer[static_cast<size_t>(l)] == MixerKind::Mla ? c.mla.row_width()
                                                                 : c.head_dim_of(l);
}

int64_t widest_attention_head(const ArchConfig& c) {
  int64_t w = 0;
  for (int64_t l = 0; l < c.n_layer; ++l) w = std::max(w, attention_head_width(c, l));
  return w;
}

ScratchPlan scratch_plan(const ModelSpec& spec, int64_t prefill_batch, bool streaming,
                         int64_t ctx) {
  const ArchConfig& c = spec.cfg;
  ScratchPlan p;
  p.max_rows = prefill_batch;
  p.n_layer = c.n_layer;
  p.n_expert = c.n_expert;
  p.experts_per_token = c.n_expert_used;
  p.decode_step_rows = std::min(prefill_batch, kDecodeStepRows);
  p.experts_one_at_a_time = streaming;
  p.n_head = c.n_head;
  p.ctx = ctx;
  // The attention of the widest layer.
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const int64_t hd = attention_head_width(c, l);
    if (hd <= p.head_dim) continue;
    p.head_dim = hd;
    p.n_head_kv = c.layer_mixer[static_cast<size_t>(l)] == MixerKind::Mla ? 1 : c.n_head_kv_of(l);
  }
  p.dense.push_back(shape_of(spec.output));
  for (const LayerIndex& L : spec.layers) {
    const auto stack = [&](std::initializer_list<LayerTensor> roles) {
      std::vector<MatmulShape> parts;
      std::vector<uint64_t> row_bytes;
      for (LayerTensor r : roles)
        if (const TensorRef* t = L.get(r)) {
          parts.push_back(shape_of(*t));
          row_bytes.push_back(bytes_per_row(*t));
        }
      if (!parts.empty()) add_stackable(p.dense, parts, row_bytes);
    };
    stack({LayerTensor::Wq, LayerTensor::Wk, LayerTensor::Wv});
    stack({LayerTensor::Wo});
    stack({LayerTensor::FfnGate, LayerTensor::FfnUp});
    stack({LayerTensor::FfnDown});
    stack({LayerTensor::Router});
    for (LayerTensor t :
         {LayerTensor::DnQkv, LayerTensor::DnZ, LayerTensor::DnBeta, LayerTensor::DnAlpha,
          LayerTensor::DnOut, LayerTensor::ShexpDown, LayerTensor::ShexpGateInp, LayerTensor::MlaQa,
          LayerTensor::MlaQb, LayerTensor::MlaKvA, LayerTensor::MlaKb, LayerTensor::MlaVb})
      stack({t});
    stack({LayerTensor::ShexpGate, LayerTensor::ShexpUp});
    if (L.experts.empty()) continue;
    const std::array<ExpertSlice, 3>& e = L.experts[0];
    const auto slice_shape = [](const ExpertSlice& s) {
      return MatmulShape{s.dtype, s.rows, s.cols};
    };
    const auto slice_row_bytes = [](const ExpertSlice& s) {
      return s.nbytes / static_cast<uint64_t>(s.rows);
    };
    add_stackable(p.experts, {slice_shape(e[kExpGate]), slice_shape(e[kExpUp])},
                  {slice_row_bytes(e[kExpGate]), slice_row_bytes(e[kExpUp])});
    p.experts.push_back(slice_shape(e[kExpDown]));
  }
  return p;
}

Footprint compute_footprint(const ModelSpec& spec, const FootprintRequest& req) {
  const ArchConfig& c = spec.cfg;
  Footprint f;
  f.streaming = c.is_moe() && req.expert_slots > 0 && req.expert_slots < c.n_expert;
  f.slots_per_layer = f.streaming ? req.expert_slots : c.n_expert;
  f.resident = spec.resident_bytes;
  f.mapped = spec.mapped_bytes;
  // Experts live in slots of their layer's stride (ExpertStore): slots_per_layer in every MoE
  // layer, all of a layer's experts when resident.
  const uint64_t slots =
      checked_mul(static_cast<uint64_t>(f.slots_per_layer), spec.expert_slot_set, "expert slots");
  if (f.streaming)
    f.expert_slots = slots;
  else
    f.resident = checked_add(f.resident, slots, "resident bytes");
  f.kv_cache =
      checked_mul(kv_bytes_per_token(c, req.kv_type), static_cast<uint64_t>(req.ctx), "KV cache");
  // The live state and its checkpoints.
  f.recurrent_state =
      checked_mul(recurrent_state_bytes(c), 1 + static_cast<uint64_t>(req.state_checkpoints),
                  "recurrent state");
  // Activations of one micro-batch: the stream, q/k/v, attention output, FFN halves, and the
  // logits of the head's rows.
  const uint64_t B = static_cast<uint64_t>(req.prefill_batch);
  const uint64_t q = static_cast<uint64_t>(c.max_q_width()),
                 kv = static_cast<uint64_t>(c.max_kv_width());
  // Exactly what Forward allocates per row: three hidden-width buffers (stream, norm, output), q
  // and attention output, k and v, the router logits and the routing (ids and weights of k
  // experts); the gathered rows and the expert output take k rows per row of an MoE micro-batch
  // (its M * k routed rows run at once); the three FFN-wide buffers (gate, up, activation) the
  // widest of a dense layer's n_ff and those k rows of n_ff_expert, of the layers the model has.
  // The head's logits are held for at most kHeadRows rows, whatever the micro-batch.
  const uint64_t k = c.is_moe() ? static_cast<uint64_t>(c.n_expert_used) : 0;
  const auto ff = static_cast<uint64_t>(ffn_row_floats(c));
  const uint64_t per_row = 3 * static_cast<uint64_t>(c.n_embd) + 2 * q + 2 * kv +
                           static_cast<uint64_t>(c.n_expert) + 2 * k + 3 * ff +
                           2 * std::max<uint64_t>(k, 1) * static_cast<uint64_t>(c.n_embd) +
                           static_cast<uint64_t>(mixer_row_floats(c));
  const uint64_t head_rows = std::min<uint64_t>(B, kHeadRows);
  // A gated attention's stacked q/k/v buffer holds one token's gate too.
  const uint64_t once = c.attn_output_gate ? q : 0;
  const uint64_t floats =
      once + checked_add(checked_mul(B, per_row, "workspace"),
                         checked_mul(head_rows, static_cast<uint64_t>(c.n_vocab), "workspace"),
                         "workspace");
  f.workspace = checked_mul(floats, 4, "workspace");
  // Resident experts: the Engine's tables of their gate / up / down pointers per MoE layer.
  if (c.is_moe() && !f.streaming)
    f.workspace = checked_add(f.workspace,
                              3 * sizeof(void*) * static_cast<uint64_t>(c.n_expert) *
                                  static_cast<uint64_t>(moe_layers(c)),
                              "workspace");
  if (req.ram_budget > 0) {
    if (!c.is_moe())
      fail(ErrorKind::Usage, "--ram-budget applies to Mixture-of-Experts models only");
    if (req.ram_budget < spec.expert_stride)
      fail(ErrorKind::Budget, "--ram-budget " + std::to_string(req.ram_budget) +
                                  " bytes is smaller than one expert (" +
                                  std::to_string(spec.expert_stride) + " bytes)");
  }
  // Resident experts need no tier; more entries than streamed experts would stay empty.
  if (f.streaming && req.ram_budget > 0) {
    const uint64_t experts = static_cast<uint64_t>(c.n_expert * moe_layers(c));
    f.ram_tier_entries =
        static_cast<int64_t>(std::min(experts, req.ram_budget / spec.expert_stride));
    f.ram_tier = static_cast<uint64_t>(f.ram_tier_entries) * spec.expert_stride;
  }
  if (req.backend != nullptr)
    f.backend_scratch =
        req.backend->scratch_bytes(scratch_plan(spec, req.prefill_batch, f.streaming, req.ctx));
  f.total = checked_add(checked_add(f.resident, f.expert_slots, "footprint"),
                        checked_add(f.kv_cache, f.workspace, "footprint"), "footprint");
  f.total = checked_add(f.total, f.recurrent_state, "footprint");
  f.total = checked_add(f.total, f.backend_scratch, "footprint");
  return f;
}

int64_t slots_for_budget(const ModelSpec& spec, FootprintRequest req, uint64_t budget) {
  const ArchConfig& c = spec.cfg;
  if (!c.is_moe())
    fail(ErrorKind::Usage, "--memory-budget applies to Mixture-of-Experts models only");
  req.expert_slots = c.n_expert;
  if (compute_footprint(spec, req).total <= budget) return c.n_expert;
  req.expert_slots = c.n_expert_used;
  const Footprint min = compute_footprint(spec, req);
  if (min.total > budget)
    fail(ErrorKind::Budget,
         "memory budget " + std::to_string(budget) + " bytes cannot hold resident weights (" +
             std::to_string(min.resident) + ") + KV cache (" + std::to_string(min.kv_cache) +
             ") + recurrent state (" + std::to_string(min.recurrent_state) + ") + workspace (" +
             std::to_string(min.workspace) + ") + backend scratch (" +
             std::to_string(min.backend_scratch) + ") + top-k " + std::to_string(c.n_expert_used) +
             " expert slots per layer (" + std::to_string(min.expert_slots) + "): needs " +
             std::to_string(min.total));
  const uint64_t per_slot = min.expert_slots / static_cast<uint64_t>(c.n_expert_used);
  const uint64_t spare = budget - min.total;
  const int64_t extra = per_slot == 0 ? 0 : static_cast<int64_t>(spare / per_slot);
  return std::min<int64_t>(c.n_expert - 1, c.n_expert_used + extra);
}

nlohmann::json footprint_json(const Footprint& f) {
  return {{"resident_bytes", f.resident},
          {"expert_slot_bytes", f.expert_slots},
          {"slots_per_layer", f.slots_per_layer},
          {"streaming", f.streaming},
          {"kv_cache_bytes", f.kv_cache},
          {"recurrent_state_bytes", f.recurrent_state},
          {"workspace_bytes", f.workspace},
          {"backend_scratch_bytes", f.backend_scratch},
          {"ram_tier_bytes", f.ram_tier},
          {"ram_tier_experts", f.ram_tier_entries},
          {"mapped_bytes", f.mapped},
          {"total_bytes", f.total}};
}

void print_footprint(const Footprint& f, std::FILE* out) {
  std::fprintf(out,
               "footprint  resident %.2f MiB + expert slots %.2f MiB (%lld/layer%s) + KV %.2f MiB "
               "+ recurrent state %.2f MiB + workspace %.2f MiB + backend scratch %.2f MiB = "
               "%.2f MiB\n",
               mib(f.resident), mib(f.expert_slots), static_cast<long long>(f.slots_per_layer),
               f.streaming ? ", streaming" : ", resident", mib(f.kv_cache), mib(f.recurrent_state),
               mib(f.workspace), mib(f.backend_scratch), mib(f.total));
  if (f.mapped > 0)
    std::fprintf(out, "footprint  per-layer embeddings %.2f MiB read where the file is mapped\n",
                 mib(f.mapped));
  if (f.ram_tier > 0)
    std::fprintf(out, "footprint  pinned RAM tier %.2f MiB (%lld experts)\n", mib(f.ram_tier),
                 static_cast<long long>(f.ram_tier_entries));
}

}  // namespace ts
