// ModelSpec: a validated configuration plus the index of every tensor the forward pass will read
// ("fail at open, not at token 1"). Opening checks names, shapes, dtypes and byte ranges of every
// tensor of every layer, and the consistency of every count, before anything is allocated.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/arch_config.h"
#include "model/model_source.h"
#include "model/tensor_names.h"

namespace ts {

// The most experts a token may be routed to: the router kernels keep top-k on the stack.
constexpr int64_t kMaxExpertsPerToken = 32;

// How an expert slice's bytes lie in its file.
enum class SliceLayout : uint8_t {
  Rows,  // its rows end to end at `offset` (a 2-D HF tensor, or a slab of a stacked GGUF one)
  // Stored transposed: row r is column first + r * step of the matrix [cols][src_width] at
  // `offset` (f32, f16 or bf16). gpt-oss's f32 checkpoints (gate and up interleaved by column),
  // Qwen3-VL-MoE's released ones (gate columns, then up columns).
  Columns,
  // gpt-oss's MXFP4 checkpoints: row r is row first + r * step of [cols / 32][16] nibble bytes
  // (low nibble = even element) at `offset` and of [cols / 32] e8m0 scales at `scale_offset`;
  // read into GGUF's MXFP4 blocks.
  Mxfp4Planes,
};

// One expert's slice of one projection, wherever it is stored. nbytes is its size in memory
// (rows x row bytes of dtype), which is also what the file holds for SliceLayout::Rows.
struct ExpertSlice {
  const MappedFile* file = nullptr;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  DType dtype = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  SliceLayout layout = SliceLayout::Rows;
  uint64_t src_bytes = 0;  // bytes read at `offset` (and scale_bytes at scale_offset) to build it
  uint64_t scale_offset = 0;
  uint64_t scale_bytes = 0;
  int64_t first = 0;  // the first source row (column) taken, and the step between them
  int64_t step = 1;
  int64_t src_width = 0;  // Columns: columns of the source matrix
};

enum ExpertProj { kExpGate = 0, kExpUp = 1, kExpDown = 2 };

struct LayerIndex {
  static constexpr size_t kRoles = static_cast<size_t>(LayerTensor::ExpGateUp) + 1;
  std::array<std::optional<TensorRef>, kRoles> tensors;
  std::vector<std::array<ExpertSlice, 3>> experts;  // [expert][gate, up, down]; MoE layers only

  const TensorRef* get(LayerTensor t) const {
    const auto& o = tensors[static_cast<size_t>(t)];
    return o ? &*o : nullptr;
  }
  uint64_t expert_bytes(int64_t e) const;
  uint64_t expert_stride() const;  // bytes of a slot of this layer: its largest expert (0: dense)
};

struct ModelSpec {
  std::unique_ptr<ModelSource> source;
  ArchConfig cfg;
  TensorRef token_embd;
  TensorRef output_norm;
  TensorRef output;  // token_embd when the embeddings are tied
  std::optional<TensorRef> rope_freqs;
  // Per-layer embeddings (Gemma 4): the table, read a row a token in place from the file's mapping
  // (not resident: mapped_bytes), and the projection of the token embedding with its norm.
  std::optional<TensorRef> per_layer_embd, per_layer_model_proj, per_layer_proj_norm;
  std::vector<LayerIndex> layers;

  uint64_t resident_bytes = 0;  // every tensor except routed experts (tied head counted once)
  uint64_t mapped_bytes = 0;    // read from the file's mapping where they lie (per_layer_embd)
  uint64_t expert_stride = 0;   // largest bytes of one expert (gate + up + down) over layers
  // A slot in every MoE layer, each of its layer's stride: mixes such as Q4_K_M give layers
  // experts of different sizes (q6_k down projections in some), so slots are sized per layer.
  uint64_t expert_slot_set = 0;
  uint64_t routed_expert_bytes = 0;  // every routed expert of every layer
};

// Opens and validates `path` (a GGUF file or an HF directory). Throws ts::Error naming the
// file, tensor or field at fault.
std::unique_ptr<ModelSpec> open_model_spec(const std::string& path);

// Checks counts and sizes of a config alone (also used by tests).
void validate_arch(const ArchConfig& c, const std::string& where);

}  // namespace ts
