// ExpertStore: where each routed expert's weights are when a layer needs them. Resident mode
// loads every expert at open; streaming mode keeps a fixed pool of slots per MoE layer and reads
// the experts the router picks from the model file (positional reads, never through the mmap),
// evicting by a cache policy. Streaming never changes a number: the same bytes reach the same
// kernels in the same order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "backend/backend.h"
#include "moe/cache_policy.h"

namespace ts {

struct ModelSpec;
class ThreadPool;

struct ExpertWeights {
  Weight gate, up, down;
};

struct ExpertStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t bytes_read = 0;
  double read_seconds = 0;  // wall time spent waiting on expert reads
  void add(const ExpertStats& o);
};

class ExpertStore {
 public:
  struct Options {
    int64_t slots_per_layer = 0;  // 0 (or >= n_expert): resident
    CachePolicyKind policy = CachePolicyKind::Lru;
  };
  ExpertStore(const ModelSpec& spec, Backend& backend, Options options);
  ~ExpertStore();

  bool streaming() const { return streaming_; }
  int64_t slots_per_layer() const { return slots_; }

  // Makes the `n` distinct experts of `layer` present (n <= slots_per_layer()) and writes their
  // weights to out[0..n). Experts already present count as hits. The pointers stay valid until
  // the next acquire() on this layer.
  void acquire(int64_t layer, const int32_t* experts, int64_t n, const ExpertWeights** out);

  const ExpertStats& layer_stats(int64_t layer) const { return stats_[static_cast<size_t>(layer)]; }
  ExpertStats total_stats() const;
  void reset_stats();
  nlohmann::json stats_json() const;

 private:
  struct Slot {
    int32_t expert = -1;  // -1: empty (or its last read failed)
    void* memory = nullptr;
    ExpertWeights weights;
  };
  struct Layer {
    std::vector<Slot> slots;
    std::unique_ptr<CachePolicy> policy;
  };
  void load(int64_t layer, int32_t expert, Slot& slot, void* staging);
  ExpertWeights view(int64_t layer, int32_t expert, const uint8_t* base) const;

  const ModelSpec& spec_;
  Backend& backend_;
  bool streaming_ = false;
  int64_t slots_ = 0;
  std::vector<Layer> layers_;
  std::vector<ExpertStats> stats_;
  std::vector<void*> staging_;  // host buffers for device backends, one per concurrent read
};

}  // namespace ts
