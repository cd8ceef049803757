#include "moe/expert_store.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_io.h"
#include "model/model_spec.h"

namespace ts {
namespace {

// Concurrent positional reads: the top-k misses of a layer are read together.
constexpr int kReadThreads = 4;

}  // namespace

void ExpertStats::add(const ExpertStats& o) {
  hits += o.hits;
  misses += o.misses;
  bytes_read += o.bytes_read;
  prefetched += o.prefetched;
  prefetch_hits += o.prefetch_hits;
  read_seconds += o.read_seconds;
  busy_seconds += o.busy_seconds;
}

ExpertStore::ExpertStore(const ModelSpec& spec, Backend& backend, Options options)
    : spec_(spec), backend_(backend) {
  const ArchConfig& c = spec.cfg;
  streaming_ = c.is_moe() && options.slots_per_layer > 0 && options.slots_per_layer < c.n_expert;
  slots_ = streaming_ ? options.slots_per_layer : c.n_expert;
  // Background reads write slot memory from I/O threads: only host memory allows that here.
  prefetch_ = streaming_ && options.prefetch && backend.is_host();
  if (streaming_ && slots_ < c.n_expert_used)
    fail(ErrorKind::Budget, "--expert-slots " + std::to_string(slots_) + " is below the " +
                                std::to_string(c.n_expert_used) + " experts each token uses");
  io_ = std::make_unique<IoQueue>(kReadThreads);
  layers_.resize(spec.layers.size());
  stats_.resize(spec.layers.size());
  busy_ns_ = std::make_unique<std::atomic<uint64_t>[]>(spec.layers.size());
  if (!backend.is_host())
    for (int i = 0; i < kReadThreads; ++i) staging_.push_back(std::malloc(spec.expert_stride));
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    if (spec.layers[l].experts.empty()) continue;
    Layer& L = layers_[l];
    L.slots.resize(static_cast<size_t>(slots_));
    L.policy = make_cache_policy(options.policy, slots_, c.n_expert);
    for (Slot& s : L.slots) s.memory = backend.alloc(spec.expert_stride);
    if (streaming_) continue;
    std::vector<std::pair<int64_t, int32_t>> all;
    for (int32_t e = 0; e < c.n_expert; ++e) all.emplace_back(e, e);
    fill_now(static_cast<int64_t>(l), all);
  }
  reset_stats();
}

ExpertStore::~ExpertStore() {
  io_.reset();  // joins the readers before their slots go away
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
    *dst[p] = Weight{s.dtype, s.rows, s.cols,
                     static_cast<size_t>(s.nbytes / static_cast<uint64_t>(s.rows)), base + off};
    off += s.nbytes;
  }
  return w;
}

void ExpertStore::read_expert(int64_t layer, int32_t expert, void* dst) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto& x = spec_.layers[static_cast<size_t>(layer)].experts[static_cast<size_t>(expert)];
  uint64_t off = 0;
  for (const ExpertSlice& s : x) {
    read_exact(
        s.file->fd(), static_cast<uint8_t*>(dst) + off, s.nbytes, s.offset,
        s.file->path() + ": layer " + std::to_string(layer) + " expert " + std::to_string(expert),
        ErrorKind::Runtime);
    off += s.nbytes;
  }
  busy_ns_[static_cast<size_t>(layer)] += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
}

int64_t ExpertStore::find(const Layer& L, int32_t expert) const {
  for (size_t s = 0; s < L.slots.size(); ++s)
    if (L.slots[s].expert == expert) return static_cast<int64_t>(s);
  return -1;
}

// Host backends: the read goes to the slot in the background. The slot claims the expert at
// once; whoever uses it waits on `loading`, and a failed read resets the claim (see ready()).
void ExpertStore::fill(int64_t layer, Slot& slot, int32_t expert) {
  if (slot.loading.valid()) {
    try {
      slot.loading.wait();  // never overwrite memory a read is still writing
      slot.loading.get();
    } catch (const Error&) {
    }
  }
  slot.expert = expert;
  slot.prefetched = false;
  slot.weights = view(layer, expert, static_cast<const uint8_t*>(slot.memory));
  stats_[static_cast<size_t>(layer)].bytes_read +=
      spec_.layers[static_cast<size_t>(layer)].expert_bytes(expert);
  void* dst = slot.memory;
  slot.loading = io_->submit([this, layer, expert, dst] { read_expert(layer, expert, dst); });
}

// Device backends (and resident loading): reads run concurrently into host staging buffers, then
// each is copied to its slot on this thread, before returning.
void ExpertStore::fill_now(int64_t layer, std::vector<std::pair<int64_t, int32_t>>& reads) {
  Layer& L = layers_[static_cast<size_t>(layer)];
  for (size_t r0 = 0; r0 < reads.size(); r0 += kReadThreads) {
    const size_t r1 = std::min(reads.size(), r0 + kReadThreads);
    std::vector<std::shared_future<void>> done;
    for (size_t r = r0; r < r1; ++r) {
      Slot& slot = L.slots[static_cast<size_t>(reads[r].first)];
      slot.expert = -1;  // a failed read must never leave a slot that claims the expert
      void* dst = staging_.empty() ? slot.memory : staging_[r - r0];
      const int32_t e = reads[r].second;
      done.push_back(io_->submit([this, layer, e, dst] { read_expert(layer, e, dst); }));
    }
    for (size_t r = r0; r < r1; ++r) {
      done[r - r0].get();
      Slot& slot = L.slots[static_cast<size_t>(reads[r].first)];
      const int32_t e = reads[r].second;
      if (!staging_.empty())
        backend_.to_device(slot.memory, staging_[r - r0],
                           spec_.layers[static_cast<size_t>(layer)].expert_bytes(e));
      slot.expert = e;
      slot.weights = view(layer, e, static_cast<const uint8_t*>(slot.memory));
      stats_[static_cast<size_t>(layer)].bytes_read +=
          spec_.layers[static_cast<size_t>(layer)].expert_bytes(e);
      L.policy->filled(reads[r].first, e);
    }
  }
}

void ExpertStore::acquire(int64_t layer, const int32_t* experts, int64_t n) {
  Layer& L = layers_[static_cast<size_t>(layer)];
  ExpertStats& st = stats_[static_cast<size_t>(layer)];
  if (n > slots_) fail(ErrorKind::Runtime, "internal: more experts requested than slots");
  std::vector<uint8_t> pinned(L.slots.size(), 0);
  L.current.assign(static_cast<size_t>(n), -1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = find(L, experts[i]);
    if (s < 0) continue;
    L.current[static_cast<size_t>(i)] = s;
    pinned[static_cast<size_t>(s)] = 1;
    st.hits++;
    Slot& slot = L.slots[static_cast<size_t>(s)];
    if (slot.prefetched) st.prefetch_hits++;
    slot.prefetched = false;
    L.policy->touch(s, experts[i]);
  }
  std::vector<std::pair<int64_t, int32_t>> reads;
  for (int64_t i = 0; i < n; ++i) {
    if (L.current[static_cast<size_t>(i)] >= 0) continue;
    const int64_t v = L.policy->victim(pinned);
    pinned[static_cast<size_t>(v)] = 1;
    L.current[static_cast<size_t>(i)] = v;
    st.misses++;
    if (backend_.is_host()) {
      fill(layer, L.slots[static_cast<size_t>(v)], experts[i]);
      L.policy->filled(v, experts[i]);
    } else {
      reads.emplace_back(v, experts[i]);
    }
  }
  if (!reads.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    fill_now(layer, reads);
    st.read_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
}

const ExpertWeights& ExpertStore::ready(int64_t layer, int64_t i) {
  Layer& L = layers_[static_cast<size_t>(layer)];
  Slot& slot = L.slots[static_cast<size_t>(L.current[static_cast<size_t>(i)])];
  if (slot.loading.valid()) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      slot.loading.get();
    } catch (...) {
      slot.expert = -1;
      slot.loading = {};
      throw;
    }
    stats_[static_cast<size_t>(layer)].read_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return slot.weights;
}

void ExpertStore::prefetch(int64_t layer, const int32_t* experts, int64_t n) {
  if (!prefetch_) return;
  Layer& L = layers_[static_cast<size_t>(layer)];
  // Never evict what the layer's current step holds, nor what this hint already placed.
  std::vector<uint8_t> pinned(L.slots.size(), 0);
  for (int64_t s : L.current) pinned[static_cast<size_t>(s)] = 1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t have = find(L, experts[i]);
    if (have >= 0) {
      pinned[static_cast<size_t>(have)] = 1;
      continue;
    }
    const int64_t v = L.policy->victim(pinned);
    if (v < 0) return;
    pinned[static_cast<size_t>(v)] = 1;
    fill(layer, L.slots[static_cast<size_t>(v)], experts[i]);
    L.slots[static_cast<size_t>(v)].prefetched = true;
    L.policy->filled(v, experts[i]);
    stats_[static_cast<size_t>(layer)].prefetched++;
  }
}

ExpertStats ExpertStore::layer_stats(int64_t layer) const {
  ExpertStats s = stats_[static_cast<size_t>(layer)];
  s.busy_seconds = static_cast<double>(busy_ns_[static_cast<size_t>(layer)].load()) * 1e-9;
  return s;
}

ExpertStats ExpertStore::total_stats() const {
  ExpertStats t;
  for (size_t l = 0; l < stats_.size(); ++l) t.add(layer_stats(static_cast<int64_t>(l)));
  return t;
}

void ExpertStore::reset_stats() {
  std::fill(stats_.begin(), stats_.end(), ExpertStats{});
  for (size_t l = 0; l < stats_.size(); ++l) busy_ns_[l] = 0;
}

nlohmann::json ExpertStore::stats_json() const {
  auto one = [](const ExpertStats& s) {
    const double lookups = static_cast<double>(s.hits + s.misses);
    return nlohmann::json{
        {"hits", s.hits},
        {"misses", s.misses},
        {"hit_rate", lookups > 0 ? static_cast<double>(s.hits) / lookups : 0.0},
        {"prefetched", s.prefetched},
        {"prefetch_hits", s.prefetch_hits},
        {"bytes_read", s.bytes_read},
        {"read_wait_seconds", s.read_seconds},
        {"read_busy_seconds", s.busy_seconds},
        // per reader thread: concurrent reads add up to more
        {"read_bandwidth_bytes_per_s",
         s.busy_seconds > 0 ? static_cast<double>(s.bytes_read) / s.busy_seconds : 0.0}};
  };
  nlohmann::json layers = nlohmann::json::array();
  for (size_t l = 0; l < stats_.size(); ++l)
    if (!layers_[l].slots.empty()) {
      auto j = one(layer_stats(static_cast<int64_t>(l)));
      j["layer"] = l;
      layers.push_back(j);
    }
  return {{"streaming", streaming_},
          {"prefetch", prefetch_},
          {"slots_per_layer", slots_},
          {"total", one(total_stats())},
          {"layers", layers}};
}

}  // namespace ts
