#include "moe/expert_store.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <thread>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_io.h"
#include "core/thread_pool.h"
#include "model/model_spec.h"

namespace ts {
namespace {

// Concurrent positional reads per layer: the top-k misses of a layer are read together.
constexpr int kReadThreads = 4;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void ExpertStats::add(const ExpertStats& o) {
  hits += o.hits;
  misses += o.misses;
  bytes_read += o.bytes_read;
  read_seconds += o.read_seconds;
}

ExpertStore::ExpertStore(const ModelSpec& spec, Backend& backend, Options options)
    : spec_(spec), backend_(backend) {
  const ArchConfig& c = spec.cfg;
  streaming_ = c.is_moe() && options.slots_per_layer > 0 && options.slots_per_layer < c.n_expert;
  slots_ = streaming_ ? options.slots_per_layer : c.n_expert;
  if (streaming_ && slots_ < c.n_expert_used)
    fail(ErrorKind::Budget, "--expert-slots " + std::to_string(slots_) + " is below the " +
                                std::to_string(c.n_expert_used) + " experts each token uses");
  layers_.resize(spec.layers.size());
  stats_.resize(spec.layers.size());
  if (!backend.is_host())
    for (int i = 0; i < kReadThreads; ++i) staging_.push_back(std::malloc(spec.expert_stride));
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    if (spec.layers[l].experts.empty()) continue;
    Layer& L = layers_[l];
    L.slots.resize(static_cast<size_t>(slots_));
    L.policy = make_cache_policy(options.policy, slots_, c.n_expert);
    for (Slot& s : L.slots) s.memory = backend.alloc(spec.expert_stride);
    if (!streaming_)
      for (int32_t e = 0; e < c.n_expert; ++e) {
        load(static_cast<int64_t>(l), e, L.slots[static_cast<size_t>(e)], staging_.empty() ? nullptr : staging_[0]);
        L.policy->filled(e, e);
      }
  }
  reset_stats();
}

ExpertStore::~ExpertStore() {
  for (Layer& L : layers_)
    for (Slot& s : L.slots) backend_.free(s.memory);
  for (void* p : staging_) std::free(p);
}

ExpertWeights ExpertStore::view(int64_t layer, int32_t expert, const uint8_t* base) const {
  const auto& x = spec_.layers[static_cast<size_t>(layer)].experts[static_cast<size_t>(expert)];
  ExpertWeights w;
  Weight* dst[3] = {&w.gate, &w.up, &w.down};
  uint64_t off = 0;
  for (int p = 0; p < 3; ++p) {
    const ExpertSlice& s = x[static_cast<size_t>(p)];
    *dst[p] = Weight{s.dtype, s.rows, s.cols, static_cast<size_t>(s.nbytes / static_cast<uint64_t>(s.rows)), base + off};
    off += s.nbytes;
  }
  return w;
}

void ExpertStore::load(int64_t layer, int32_t expert, Slot& slot, void* staging) {
  slot.expert = -1;  // a failed read must never leave a slot that claims the expert
  const auto& x = spec_.layers[static_cast<size_t>(layer)].experts[static_cast<size_t>(expert)];
  auto* dst = static_cast<uint8_t*>(staging ? staging : slot.memory);
  uint64_t off = 0;
  for (const ExpertSlice& s : x) {
    read_exact(s.file->fd(), dst + off, s.nbytes, s.offset,
               s.file->path() + ": layer " + std::to_string(layer) + " expert " + std::to_string(expert),
               ErrorKind::Runtime);
    off += s.nbytes;
  }
  if (staging) backend_.to_device(slot.memory, staging, off);
  slot.weights = view(layer, expert, static_cast<const uint8_t*>(slot.memory));
  slot.expert = expert;
}

void ExpertStore::acquire(int64_t layer, const int32_t* experts, int64_t n, const ExpertWeights** out) {
  Layer& L = layers_[static_cast<size_t>(layer)];
  ExpertStats& st = stats_[static_cast<size_t>(layer)];
  if (n > slots_) fail(ErrorKind::Runtime, "internal: more experts requested than slots");
  std::vector<uint8_t> pinned(L.slots.size(), 0);
  std::vector<int64_t> slot_of(static_cast<size_t>(n), -1);
  for (int64_t i = 0; i < n; ++i)
    for (size_t s = 0; s < L.slots.size(); ++s)
      if (L.slots[s].expert == experts[i]) {
        slot_of[static_cast<size_t>(i)] = static_cast<int64_t>(s);
        pinned[s] = 1;
      }
  // Choose a victim for every miss first, then read all misses together.
  std::vector<std::pair<int64_t, int32_t>> reads;  // (slot, expert)
  for (int64_t i = 0; i < n; ++i) {
    if (slot_of[static_cast<size_t>(i)] >= 0) {
      st.hits++;
      L.policy->touch(slot_of[static_cast<size_t>(i)], experts[i]);
      continue;
    }
    const int64_t v = L.policy->victim(pinned);
    pinned[static_cast<size_t>(v)] = 1;
    slot_of[static_cast<size_t>(i)] = v;
    reads.emplace_back(v, experts[i]);
    st.misses++;
  }
  if (!reads.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t r0 = 0; r0 < reads.size(); r0 += kReadThreads) {
      const size_t r1 = std::min(reads.size(), r0 + kReadThreads);
      std::vector<std::thread> threads;
      std::vector<std::exception_ptr> errors(r1 - r0);
      for (size_t r = r0; r < r1; ++r)
        threads.emplace_back([&, r] {
          try {
            load(layer, reads[r].second, L.slots[static_cast<size_t>(reads[r].first)],
                 staging_.empty() ? nullptr : staging_[r - r0]);
          } catch (...) {
            errors[r - r0] = std::current_exception();
          }
        });
      for (auto& t : threads) t.join();
      for (auto& e : errors)
        if (e) std::rethrow_exception(e);
    }
    st.read_seconds += seconds_since(t0);
    for (auto [slot, e] : reads) {
      st.bytes_read += spec_.layers[static_cast<size_t>(layer)].expert_bytes(e);
      L.policy->filled(slot, e);
    }
  }
  for (int64_t i = 0; i < n; ++i) out[i] = &L.slots[static_cast<size_t>(slot_of[static_cast<size_t>(i)])].weights;
}

ExpertStats ExpertStore::total_stats() const {
  ExpertStats t;
  for (const ExpertStats& s : stats_) t.add(s);
  return t;
}

void ExpertStore::reset_stats() { std::fill(stats_.begin(), stats_.end(), ExpertStats{}); }

nlohmann::json ExpertStore::stats_json() const {
  auto one = [](const ExpertStats& s) {
    const double lookups = static_cast<double>(s.hits + s.misses);
    return nlohmann::json{{"hits", s.hits},
                          {"misses", s.misses},
                          {"hit_rate", lookups > 0 ? static_cast<double>(s.hits) / lookups : 0.0},
                          {"bytes_read", s.bytes_read},
                          {"read_seconds", s.read_seconds},
                          {"read_bandwidth_bytes_per_s", s.read_seconds > 0 ? static_cast<double>(s.bytes_read) / s.read_seconds : 0.0}};
  };
  nlohmann::json layers = nlohmann::json::array();
  for (size_t l = 0; l < stats_.size(); ++l)
    if (!layers_[l].slots.empty()) {
      auto j = one(stats_[l]);
      j["layer"] = l;
      layers.push_back(j);
    }
  return {{"streaming", streaming_}, {"slots_per_layer", slots_}, {"total", one(total_stats())}, {"layers", layers}};
}

}  // namespace ts
