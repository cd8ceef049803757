#include "moe/expert_store.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <numeric>
#include <type_traits>

#include "core/error.h"
#include "core/file_io.h"
#include "model/model_spec.h"
#include "moe/expert_slice_read.h"
#include "moe/io_fault.h"

namespace ts {
namespace {

// Concurrent positional reads: the top-k misses of a layer are read together.
constexpr int kReadThreads = 4;
// Device backends: each expert is read in chunks by this many threads at once (one reader of
// the page cache copies well under the host-to-device rate), into this many pinned staging
// buffers when there is no RAM tier, so that the copy of one expert to the device overlaps the
// reads of the next ones.
constexpr int kDeviceReadThreads = 12;
constexpr size_t kStagingBuffers = 4;
constexpr uint64_t kReadChunk = uint64_t{1} << 20;

}  // namespace

void ExpertStats::add(const ExpertStats& o) {
  hits += o.hits;
  misses += o.misses;
  bytes_read += o.bytes_read;
  ram_hits += o.ram_hits;
  prefetched += o.prefetched;
  prefetch_hits += o.prefetch_hits;
  read_seconds += o.read_seconds;
  busy_seconds += o.busy_seconds;
  for (int d = 0; d < 2; ++d) {
    ahead_hits[d] += o.ahead_hits[d];
    ahead_total[d] += o.ahead_total[d];
  }
}

ExpertStore::ExpertStore(const ModelSpec& spec, Backend& backend, Options options)
    : spec_(spec), backend_(backend) {
  const ArchConfig& c = spec.cfg;
  streaming_ = c.is_moe() && options.slots_per_layer > 0 && options.slots_per_layer < c.n_expert;
  slots_ = streaming_ ? options.slots_per_layer : c.n_expert;
  // Background reads write slot memory from I/O threads: only host memory allows that. A device
  // backend prefetches by async copies from its RAM tier.
  prefetch_ = streaming_ && options.prefetch && (backend.is_host() || options.ram_tier_entries > 0);
  if (streaming_ && slots_ < c.n_expert_used)
    fail(ErrorKind::Budget, "--expert-slots " + std::to_string(slots_) + " is below the " +
                                std::to_string(c.n_expert_used) + " experts each token uses");
  io_ = std::make_unique<IoQueue>(backend.is_host() ? kReadThreads : kDeviceReadThreads);
  layers_.resize(spec.layers.size());
  stats_.resize(spec.layers.size());
  busy_ns_ = std::make_unique<std::atomic<uint64_t>[]>(spec.layers.size());
  if (!backend.is_host() && c.is_moe()) {
    ram_tier_ = streaming_ ? options.ram_tier_entries : 0;
    host_ = std::make_unique<HostTier>(
        backend, ram_tier_ > 0 ? ram_tier_ : static_cast<int64_t>(kStagingBuffers),
        spec.expert_stride, static_cast<int64_t>(spec.layers.size()), c.n_expert, ram_tier_ > 0);
  }
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    if (spec.layers[l].experts.empty()) continue;
    Layer& L = layers_[l];
    L.slots.resize(static_cast<size_t>(slots_));
    L.policy = make_cache_policy(options.policy, slots_, c.n_expert);
    // Each layer's slots hold its own largest expert, not the model's (footprint.cpp counts them
    // so).
    const uint64_t stride = spec.layers[l].expert_stride();
    for (Slot& s : L.slots) s.memory = backend.alloc(stride);
    if (backend.indexes_experts_on_device()) make_table(static_cast<int64_t>(l));
    if (streaming_) continue;
    std::vector<std::pair<int64_t, int32_t>> all;
    for (int32_t e = 0; e < c.n_expert; ++e) all.emplace_back(e, e);
    if (backend.is_host()) {
      for (const auto& [slot, e] : all) fill(static_cast<int64_t>(l), L.slots[slot], e, true);
      for (Slot& s : L.slots) {
        s.loading.get();
        s.loading = {};
      }
    } else {
      start_reads(static_cast<int64_t>(l), all);
      for (size_t k = 0; k < all.size(); ++k) finish_read(static_cast<int64_t>(l), k);
      pack_resident(static_cast<int64_t>(l));
    }
    for (const auto& [slot, e] : all) L.policy->filled(slot, e);
    if (L.mirror != nullptr) {
      L.current.resize(all.size());
      std::iota(L.current.begin(), L.current.end(), 0);
      publish_table(static_cast<int64_t>(l));
    }
  }
  if (streaming_ && can_page(options)) start_paging();
  if (backend.is_host() && streaming_) open_reader(options.io);
  reset_stats();
}

// After the slots are allocated: what is left available decides whether the page cache can hold
// every routed expert (Auto).
void ExpertStore::open_reader(ExpertIo io) {
  if (io == ExpertIo::Auto)
    io = spec_.routed_expert_bytes <= available_memory() ? ExpertIo::Pread : ExpertIo::Direct;
  if (io != ExpertIo::Pread) reader_ = UringReader::open(io == ExpertIo::Direct);
  io_mode_ = !reader_ ? ExpertIo::Pread : io;
  // Read through pread, an expert comes from the page cache (auto picks pread when the cache holds
  // them all): a miss costs a copy, which a guess can only add to, and the guesses themselves (two
  // router matmuls a layer) cost the bundled model more than its misses.
  if (!reader_) prefetch_ = false;
}

bool ExpertStore::can_page(const Options& options) const {
  if (backend_.is_host() || !backend_.indexes_experts_on_device() ||
      options.policy != CachePolicyKind::Lru)
    return false;
  int64_t moe_layers = 0;
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (layers_[l].slots.empty()) continue;
    ++moe_layers;
    if (layers_[l].mirror == nullptr) return false;
    const ExpertTable& t = layers_[l].table;
    for (const Weight* w : {&t.gate_shape, &t.up_shape, &t.down_shape})
      if (!backend_.pages_experts(w->dtype)) return false;
  }
  return ram_tier_ >= moe_layers * spec_.cfg.n_expert;
}

// Every expert into the RAM tier (the device reads misses from there), then each layer's state.
void ExpertStore::start_paging() {
  const int32_t E = static_cast<int32_t>(spec_.cfg.n_expert);
  std::vector<std::shared_future<void>> reads;
  int64_t entry = 0;
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (layers_[l].slots.empty()) continue;
    layers_[l].host_views.resize(static_cast<size_t>(E));
    for (int32_t e = 0; e < E; ++e, ++entry) {
      const auto layer = static_cast<int64_t>(l);
      uint8_t* dst = host_->memory(entry);
      host_->assign(entry, layer, e);
      layers_[l].host_views[static_cast<size_t>(e)] = view(layer, e, dst);
      reads.push_back(io_->submit([this, layer, e, dst] { read_expert(layer, e, dst); }));
    }
  }
  for (auto& r : reads) r.get();  // a failed read throws, naming the layer and expert
  for (size_t l = 0; l < layers_.size(); ++l)
    if (!layers_[l].slots.empty()) make_pages(static_cast<int64_t>(l));
  prefetch_ = false;
  paging_ = true;
}

// The layer's paging state in backend memory, its contents then written by slots_to_device():
// no slot holds an expert yet, every table entry points at the expert's bytes in the RAM tier.
void ExpertStore::make_pages(int64_t layer) {
  Layer& L = layers_[static_cast<size_t>(layer)];
  const int64_t E = spec_.cfg.n_expert, S = slots_;
  const auto place = [&](const auto& host) {
    using T = typename std::decay_t<decltype(host)>::value_type;
    const size_t bytes = host.size() * sizeof(T);
    void* dev = backend_.alloc(bytes);
    L.pages_memory.push_back(dev);
    backend_.to_device(dev, host.data(), bytes);
    return static_cast<T*>(dev);
  };
  ExpertPages& p = L.pages;
  p.n_expert = E;
  p.n_slots = S;
  p.slot_of = place(std::vector<int32_t>(static_cast<size_t>(E)));
  p.owner = place(std::vector<int32_t>(static_cast<size_t>(S)));
  p.stamp = place(std::vector<uint32_t>(static_cast<size_t>(S + 1)));
  p.counts = place(std::vector<uint64_t>(2, 0));
  std::vector<const void*> host(static_cast<size_t>(E));
  for (int32_t e = 0; e < E; ++e)
    host[static_cast<size_t>(e)] = L.host_views[static_cast<size_t>(e)].gate.data;
  p.host = place(host);
  std::vector<void*> slots;
  for (const Slot& slot : L.slots) slots.push_back(slot.memory);
  p.slot = place(slots);
  p.fill = place(std::vector<void*>(static_cast<size_t>(3 * E)));
  p.table = L.device_table;
  const ExpertWeights& first = L.host_views[0];
  const auto* base = static_cast<const uint8_t*>(first.gate.data);
  p.offset[0] = 0;
  p.offset[1] = static_cast<size_t>(static_cast<const uint8_t*>(first.up.data) - base);
  p.offset[2] = static_cast<size_t>(static_cast<const uint8_t*>(first.down.data) - base);
  slots_to_device(layer);  // every slot is still empty (streamed slots start so)
}

void ExpertStore::slots_to_host(int64_t layer) {
  Layer& L = layers_[static_cast<size_t>(layer)];
  const ExpertPages& p = L.pages;
  std::vector<int32_t> owner(static_cast<size_t>(p.n_slots));
  std::vector<uint32_t> stamp(static_cast<size_t>(p.n_slots + 1));
  backend_.to_host(owner.data(), p.owner, owner.size() * sizeof(int32_t));
  backend_.to_host(stamp.data(), p.stamp, stamp.size() * sizeof(uint32_t));
  // Filled in the device's order of last use, so the host's LRU evicts what the device would.
  std::vector<int64_t> order(owner.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return stamp[static_cast<size_t>(a)] < stamp[static_cast<size_t>(b)];
  });
  for (const int64_t s : order) {
    Slot& slot = L.slots[static_cast<size_t>(s)];
    slot.expert = owner[static_cast<size_t>(s)];
    slot.loading = {};
    slot.prefetched = false;
    if (slot.expert < 0) continue;
    slot.weights = view(layer, slot.expert, static_cast<const uint8_t*>(slot.memory));
    L.policy->filled(s, slot.expert);
  }
}

void ExpertStore::slots_to_device(int64_t layer) {
  Layer& L = layers_[static_cast<size_t>(layer)];
  const ExpertPages& p = L.pages;
  const int64_t E = p.n_expert;
  std::vector<int32_t> slot_of(static_cast<size_t>(E), -1), owner(static_cast<size_t>(p.n_slots));
  for (int64_t e = 0; e < E; ++e) {
    const ExpertWeights& w = L.host_views[static_cast<size_t>(e)];
    L.mirror[e] = w.gate.data;
    L.mirror[E + e] = w.up.data;
    L.mirror[2 * E + e] = w.down.data;
  }
  for (int64_t s = 0; s < p.n_slots; ++s) {
    const Slot& slot = L.slots[static_cast<size_t>(s)];
    owner[static_cast<size_t>(s)] = slot.expert;
    if (slot.expert < 0) continue;
    slot_of[static_cast<size_t>(slot.expert)] = static_cast<int32_t>(s);
    for (int64_t j = 0; j < 3; ++j)
      L.mirror[j * E + slot.expert] = static_cast<const uint8_t*>(slot.memory) + p.offset[j];
  }
  // Every slot equally old: the device's LRU starts afresh from the host's fills.
  const std::vector<uint32_t> stamp(static_cast<size_t>(p.n_slots + 1), 0);
  const std::vector<void*> fill(static_cast<size_t>(3 * E), nullptr);
  backend_.to_device(p.slot_of, slot_of.data(), slot_of.size() * sizeof(int32_t));
  backend_.to_device(p.owner, owner.data(), owner.size() * sizeof(int32_t));
  backend_.to_device(p.stamp, stamp.data(), stamp.size() * sizeof(uint32_t));
  backend_.to_device(p.fill, fill.data(), fill.size() * sizeof(void*));
  backend_.to_device(L.device_table, L.mirror, static_cast<size_t>(3 * E) * sizeof(void*));
}

const ExpertPages* ExpertStore::pages(int64_t layer) const {
  return paging_ && !layers_[static_cast<size_t>(layer)].slots.empty()
             ? &layers_[static_cast<size_t>(layer)].pages
             : nullptr;
}

ExpertStore::~ExpertStore() {
  drain_reads();
  reader_.reset();         // waits for the reads in flight, whose packing goes to io_
  io_.reset();             // joins the readers before their slots go away
  backend_.synchronize();  // no copy still reads staging memory or writes a slot
  for (Layer& L : layers_) {
    for (Slot& s : L.slots) backend_.free(s.memory);
    for (void* p : L.pages_memory) backend_.free(p);
    backend_.free(L.device_table);
    backend_.free_host_pinned(static_cast<void*>(L.mirror));
  }
}

// One table per layer when every expert has the shapes of expert 0 (else the layer's experts run
// one matmul each): [gate pointers][up pointers][down pointers], n_expert each, all null at first.
void ExpertStore::make_table(int64_t layer) {
  Layer& L = layers_[static_cast<size_t>(layer)];
  const auto base = static_cast<const uint8_t*>(L.slots[0].memory);
  const ExpertWeights first = view(layer, 0, base);
  const auto same = [](const Weight& a, const Weight& b) {
    return a.dtype == b.dtype && a.rows == b.rows && a.cols == b.cols &&
           a.row_stride == b.row_stride;
  };
  const int64_t E = spec_.cfg.n_expert;
  for (int32_t e = 1; e < E; ++e) {
    const ExpertWeights w = view(layer, e, base);
    if (!same(w.gate, first.gate) || !same(w.up, first.up) || !same(w.down, first.down) ||
        !same(w.gate_up, first.gate_up))
      return;
  }
  const size_t bytes = static_cast<size_t>(3 * E) * sizeof(void*);
  auto* dev = static_cast<const void**>(backend_.alloc(bytes));
  L.device_table = dev;
  L.mirror = static_cast<const void**>(backend_.alloc_host_pinned(bytes));
  std::fill(L.mirror, L.mirror + 3 * E, nullptr);
  L.table = ExpertTable{dev, dev + E, dev + 2 * E, first.gate, first.up, first.down, first.gate_up};
}

template <class Pack>
void ExpertStore::pack_expert(ExpertWeights& w, const Pack& pack) const {
  if (w.gate_up.rows > 0 && w.gate.rows % backend_.weight_row_group(w.gate.dtype) == 0) {
    pack(w.gate_up);
    w.gate.layout = w.up.layout = w.gate_up.layout;
  } else {
    pack(w.gate);
    pack(w.up);
    // A stacked view over two differently packed halves would be neither layout.
    if (w.gate.layout != w.up.layout || w.gate.layout != w.gate_up.layout) w.gate_up = Weight{};
  }
  pack(w.down);
}

// Resident experts on a device in the backend's packed layout, as the dense weights are (CUDA:
// q8_0 in 4-row groups, q6_k rows of bodies then d values). Streamed experts on a device keep the
// file's layout: their slots are refilled with the file's bytes. (A host backend's experts,
// resident or streamed, are packed by the reader that fills their slot: fill().)
void ExpertStore::pack_resident(int64_t layer) {
  Layer& L = layers_[static_cast<size_t>(layer)];
  for (Slot& s : L.slots) pack_expert(s.weights, [this](Weight& w) { backend_.pack_weight(w); });
  if (L.mirror == nullptr) return;
  const ExpertWeights& first = L.slots[0].weights;
  L.table.gate_shape.layout = first.gate.layout;
  L.table.up_shape.layout = first.up.layout;
  L.table.down_shape.layout = first.down.layout;
  if (first.gate_up.rows == 0) L.table.gate_up_shape = Weight{};
  L.table.gate_up_shape.layout = first.gate_up.layout;
}

const ExpertTable* ExpertStore::table(int64_t layer) const {
  const Layer& L = layers_[static_cast<size_t>(layer)];
  return L.mirror != nullptr ? &L.table : nullptr;
}

void ExpertStore::publish_table(int64_t layer) {
  Layer& L = layers_[static_cast<size_t>(layer)];
  if (L.mirror == nullptr) return;
  const int64_t E = spec_.cfg.n_expert;
  // The mirror is the source of the last update's copy, which may not have run yet.
  backend_.host_waits_for(L.table_copy);
  bool changed = false;
  for (const int64_t s : L.current) {
    const Slot& slot = L.slots[static_cast<size_t>(s)];
    if (slot.expert < 0) fail(ErrorKind::Runtime, "internal: publish_table() before ready()");
    const void* ptrs[3] = {slot.weights.gate.data, slot.weights.up.data, slot.weights.down.data};
    for (int p = 0; p < 3; ++p) {
      const void*& entry = L.mirror[p * E + slot.expert];
      changed = changed || entry != ptrs[p];
      entry = ptrs[p];
    }
  }
  if (!changed) return;
  backend_.copy_after_compute();  // ops queued before may still read the old entries
  L.table_copy = backend_.copy_to_device_async(L.device_table, L.mirror,
                                               static_cast<size_t>(3 * E) * sizeof(void*));
  backend_.compute_waits_for(L.table_copy);
}

const ExpertWeights& ExpertStore::resident(int64_t layer, int32_t expert) const {
  if (streaming_) fail(ErrorKind::Runtime, "internal: resident() on streamed experts");
  // Resident slots hold expert e in slot e (filled in order at open).
  return layers_[static_cast<size_t>(layer)].slots[static_cast<size_t>(expert)].weights;
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
  if (w.gate.dtype == w.up.dtype && w.gate.cols == w.up.cols &&
      w.gate.row_stride == w.up.row_stride)
    w.gate_up =
        Weight{w.gate.dtype, w.gate.rows + w.up.rows, w.gate.cols, w.gate.row_stride, w.gate.data};
  return w;
}

void ExpertStore::read_expert(int64_t layer, int32_t expert, void* dst) {
  read_range(layer, expert, static_cast<uint8_t*>(dst), 0,
             spec_.layers[static_cast<size_t>(layer)].expert_bytes(expert));
}

// Bytes [begin, end) of the expert's gate, up and down slices laid end to end, to dst + begin.
void ExpertStore::read_range(int64_t layer, int32_t expert, uint8_t* dst, uint64_t begin,
                             uint64_t end) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto& x = spec_.layers[static_cast<size_t>(layer)].experts[static_cast<size_t>(expert)];
  const std::string what = "layer " + std::to_string(layer) + " expert " + std::to_string(expert);
  if (const IoFault f = take_io_fault(); f != IoFault::None)
    fail(ErrorKind::Runtime, x[0].file->path() + ": " + what +
                                 (f == IoFault::Error ? ": read failed: Input/output error"
                                                      : ": short read (file truncated?)"));
  uint64_t off = 0;
  for (const ExpertSlice& s : x) {
    const uint64_t b = std::max(begin, off), e = std::min(end, off + s.nbytes);
    if (b < e) read_expert_slice(s, dst + b, b - off, e - off, what);
    off += s.nbytes;
  }
  busy_ns_[static_cast<size_t>(layer)] += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
}

void ExpertStore::score_absent_guesses(Layer& L, const int32_t* experts, int64_t n) {
  if (L.absent_guess.empty()) return;
  for (int64_t i = 0; i < n; ++i) L.absent_right += L.absent_guess[static_cast<size_t>(experts[i])];
  for (uint8_t& g : L.absent_guess) {
    L.absent_guessed += g;
    g = 0;
  }
}

// Reads on a guess go on while at least half the absent experts guessed turn out used (and over
// the first few guesses, which measure that).
bool ExpertStore::guesses_pay(const Layer& L) const {
  constexpr uint64_t kProbe = 32;
  return L.absent_guessed < kProbe || 2 * L.absent_right >= L.absent_guessed;
}

int64_t ExpertStore::victim(const Layer& L, const std::vector<uint8_t>& pinned) const {
  for (size_t s = 0; s < L.slots.size(); ++s)
    if (!pinned[s] && (L.slots[s].expert < 0 || L.slots[s].stale)) return static_cast<int64_t>(s);
  return L.policy->victim(pinned);
}

void ExpertStore::note_lookahead(int64_t layer, int distance, int64_t hits, int64_t n) {
  ExpertStats& st = stats_[static_cast<size_t>(layer)];
  st.ahead_hits[distance - 1] += static_cast<uint64_t>(hits);
  st.ahead_total[distance - 1] += static_cast<uint64_t>(n);
}

int64_t ExpertStore::find(const Layer& L, int32_t expert) const {
  for (size_t s = 0; s < L.slots.size(); ++s)
    if (L.slots[s].expert == expert) return static_cast<int64_t>(s);
  return -1;
}

// Host backends: the read goes to the slot in the background. The slot claims the expert at
// once; whoever uses it waits on `loading`, and a failed read resets the claim (see ready()).
void ExpertStore::fill(int64_t layer, Slot& slot, int32_t expert, bool demand) {
  if (slot.loading.valid()) {
    try {
      slot.loading.wait();  // never overwrite memory a read is still writing
      slot.loading.get();
    } catch (const Error&) {
    }
  }
  slot.expert = expert;
  slot.prefetched = false;
  slot.stale = false;
  slot.weights = view(layer, expert, static_cast<const uint8_t*>(slot.memory));
  stats_[static_cast<size_t>(layer)].bytes_read +=
      spec_.layers[static_cast<size_t>(layer)].expert_bytes(expert);
  if (fill_uring(layer, slot, expert, demand)) return;
  void* dst = slot.memory;
  // The reader packs what it read (host backends); the slot's weights are read only after
  // `loading` is waited for.
  ExpertWeights* weights = &slot.weights;
  slot.loading = io_->submit([this, layer, expert, dst, weights] {
    read_expert(layer, expert, dst);
    pack_expert(*weights, [this](Weight& w) { backend_.pack_expert_weight(w); });
  });
}

// The expert's slices as io_uring reads into the slot; on completion a reader thread checks and
// packs them, then `loading` is ready. Slices stored otherwise than as rows need pread.
bool ExpertStore::fill_uring(int64_t layer, Slot& slot, int32_t expert, bool demand) {
  if (!reader_) return false;
  const auto& x = spec_.layers[static_cast<size_t>(layer)].experts[static_cast<size_t>(expert)];
  std::vector<UringReader::Range> ranges;
  auto* dst = static_cast<uint8_t*>(slot.memory);
  uint64_t off = 0;
  for (const ExpertSlice& s : x) {
    if (s.layout != SliceLayout::Rows) return false;
    ranges.push_back({s.file->fd(), s.file->path(), s.offset, s.nbytes, dst + off});
    off += s.nbytes;
  }
  const std::string what =
      x[0].file->path() + ": layer " + std::to_string(layer) + " expert " + std::to_string(expert);
  auto done = std::make_shared<std::promise<void>>();
  slot.loading = done->get_future().share();
  ExpertWeights* weights = &slot.weights;
  const auto t0 = std::chrono::steady_clock::now();
  slot.ticket = reader_->read(
      std::move(ranges), demand, what,
      [this, done, weights, layer, expert, dst, what, t0](std::exception_ptr error) {
        busy_ns_[static_cast<size_t>(layer)] +=
            static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      std::chrono::steady_clock::now() - t0)
                                      .count());
        if (error) {
          done->set_exception(error);
          return;
        }
        io_->submit([this, done, weights, layer, expert, dst, what] {
          try {
            const auto& slices =
                spec_.layers[static_cast<size_t>(layer)].experts[static_cast<size_t>(expert)];
            uint64_t o = 0;
            for (const ExpertSlice& s : slices) {
              check_expert_slice(s, dst + o, what);
              o += s.nbytes;
            }
            pack_expert(*weights, [this](Weight& w) { backend_.pack_expert_weight(w); });
            done->set_value();
          } catch (...) {
            done->set_exception(std::current_exception());
          }
        });
      });
  return true;
}

// Device backends: each miss of a wave is copied to its slot from a host tier entry: the one
// holding it in the RAM tier, or one it is read into from the file, in chunks by all reader
// threads. An entry the wave still copies from is reused only after that copy is queued (its
// read starts then); the others' reads start at once. finish_read(k), in wave order, queues the
// k-th expert's copy on the copy stream chunk by chunk as the reads land and makes compute wait
// for that copy alone.
void ExpertStore::start_reads(int64_t layer,
                              const std::vector<std::pair<int64_t, int32_t>>& misses) {
  drain_reads();
  reads_.clear();
  reads_layer_ = layer;
  wave_user_.assign(static_cast<size_t>(host_->entries()), -1);
  Layer& L = layers_[static_cast<size_t>(layer)];
  ExpertStats& st = stats_[static_cast<size_t>(layer)];
  for (size_t k = 0; k < misses.size(); ++k) {
    const auto [slot, expert] = misses[k];
    L.slots[static_cast<size_t>(slot)].expert = -1;  // claimed once its copy is queued
    DeviceRead r{slot, expert, host_->find(layer, expert), false, -1, {}, false};
    r.cached = r.entry >= 0;
    if (r.cached) {
      st.ram_hits++;
    } else {
      r.entry = host_->victim(wave_user_);
      host_->assign(r.entry, layer, expert);
      st.bytes_read += spec_.layers[static_cast<size_t>(layer)].expert_bytes(expert);
    }
    host_->touch(r.entry);
    const int64_t before = wave_user_[static_cast<size_t>(r.entry)];
    if (before >= 0) reads_[static_cast<size_t>(before)].then = static_cast<int64_t>(k);
    wave_user_[static_cast<size_t>(r.entry)] = static_cast<int64_t>(k);
    reads_.push_back(std::move(r));
  }
  backend_.copy_after_compute();  // the victims' old experts may still be read by queued ops
  std::vector<uint8_t> waits(reads_.size(), 0);
  for (const DeviceRead& r : reads_)
    if (r.then >= 0) waits[static_cast<size_t>(r.then)] = 1;
  for (size_t k = 0; k < reads_.size(); ++k)
    if (!reads_[k].cached && !waits[k]) submit_read(layer, k);
}

void ExpertStore::submit_read(int64_t layer, size_t k) {
  DeviceRead& r = reads_[k];
  uint8_t* dst = host_->memory(r.entry);
  const uint64_t bytes = spec_.layers[static_cast<size_t>(layer)].expert_bytes(r.expert);
  const uint64_t copy = host_->last_copy(r.entry);  // the entry's last copy must have left it
  const int32_t e = r.expert;
  for (uint64_t b = 0; b < bytes; b += kReadChunk) {
    const uint64_t end = std::min(bytes, b + kReadChunk);
    r.chunks.push_back(io_->submit([this, layer, e, dst, b, end, copy] {
      backend_.host_waits_for(copy);
      read_range(layer, e, dst, b, end);
    }));
  }
}

// Each chunk is copied as soon as it is read, so the copy of an expert overlaps its own reads.
void ExpertStore::finish_read(int64_t layer, size_t k) {
  DeviceRead& r = reads_[k];
  Layer& L = layers_[static_cast<size_t>(layer)];
  Slot& slot = L.slots[static_cast<size_t>(r.slot)];
  const uint64_t bytes = spec_.layers[static_cast<size_t>(layer)].expert_bytes(r.expert);
  const uint8_t* src = host_->memory(r.entry);
  auto* dst = static_cast<uint8_t*>(slot.memory);
  uint64_t copy = 0;
  if (r.cached) copy = backend_.copy_to_device_async(dst, src, bytes);
  for (size_t c = 0; c < r.chunks.size(); ++c) {
    r.chunks[c].get();  // a failed read throws; its slot stays unclaimed
    const uint64_t b = c * kReadChunk, e = std::min(bytes, b + kReadChunk);
    copy = backend_.copy_to_device_async(dst + b, src + b, e - b);
  }
  host_->set_last_copy(r.entry, copy);
  backend_.compute_waits_for(copy);  // the copy stream runs in order: every chunk is in
  r.done = true;
  slot.expert = r.expert;
  slot.stale = false;
  slot.weights = view(layer, r.expert, static_cast<const uint8_t*>(slot.memory));
  if (r.then >= 0) submit_read(layer, static_cast<size_t>(r.then));
}

// Waits for every read still writing a host entry (after a failed read, or at teardown). The RAM
// tier forgets the experts whose reads failed or never started.
void ExpertStore::drain_reads() {
  for (DeviceRead& r : reads_) {
    bool failed = !r.cached && r.chunks.empty();
    for (auto& c : r.chunks) {
      try {
        c.wait();
        c.get();
      } catch (const Error&) {
        failed = true;
      }
    }
    if (failed) host_->drop(reads_layer_, r.expert);
  }
}

void ExpertStore::acquire(int64_t layer, const int32_t* experts, int64_t n) {
  Layer& L = layers_[static_cast<size_t>(layer)];
  ExpertStats& st = stats_[static_cast<size_t>(layer)];
  if (n > slots_) fail(ErrorKind::Runtime, "internal: more experts requested than slots");
  std::vector<uint8_t> pinned(L.slots.size(), 0);
  L.current.assign(static_cast<size_t>(n), -1);
  score_absent_guesses(L, experts, n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = find(L, experts[i]);
    if (s < 0) continue;
    L.current[static_cast<size_t>(i)] = s;
    pinned[static_cast<size_t>(s)] = 1;
    st.hits++;
    Slot& slot = L.slots[static_cast<size_t>(s)];
    if (slot.prefetched) {
      st.prefetch_hits++;
      if (slot.ticket) reader_->promote(slot.ticket);  // still queued: ahead of other guesses
      backend_.compute_waits_for(slot.copy);
    }
    slot.prefetched = false;
    slot.stale = false;
    L.policy->touch(s, experts[i]);
  }
  // The step has passed the guesses for this layer that it did not use.
  for (size_t s = 0; s < L.slots.size(); ++s)
    if (L.slots[s].prefetched && !pinned[s]) {
      L.slots[s].prefetched = false;
      L.slots[s].stale = true;
    }
  std::vector<std::pair<int64_t, int32_t>> reads;
  L.current_read.assign(static_cast<size_t>(n), -1);
  for (int64_t i = 0; i < n; ++i) {
    if (L.current[static_cast<size_t>(i)] >= 0) continue;
    const int64_t v = victim(L, pinned);
    pinned[static_cast<size_t>(v)] = 1;
    L.current[static_cast<size_t>(i)] = v;
    st.misses++;
    if (backend_.is_host()) {
      fill(layer, L.slots[static_cast<size_t>(v)], experts[i], true);
    } else {
      L.current_read[static_cast<size_t>(i)] = static_cast<int64_t>(reads.size());
      reads.emplace_back(v, experts[i]);
    }
    L.policy->filled(v, experts[i]);
  }
  if (!reads.empty()) start_reads(layer, reads);
}

const ExpertWeights& ExpertStore::ready(int64_t layer, int64_t i) {
  Layer& L = layers_[static_cast<size_t>(layer)];
  Slot& slot = L.slots[static_cast<size_t>(L.current[static_cast<size_t>(i)])];
  const int64_t k = backend_.is_host() ? -1 : L.current_read[static_cast<size_t>(i)];
  if (k >= 0 && !reads_[static_cast<size_t>(k)].done) {
    const auto t0 = std::chrono::steady_clock::now();
    // In wave order: a read that reuses an entry starts when the copy before it is queued.
    for (int64_t j = 0; j <= k; ++j)
      if (!reads_[static_cast<size_t>(j)].done) finish_read(layer, static_cast<size_t>(j));
    stats_[static_cast<size_t>(layer)].read_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
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
  // Never evict what the layer's last step used (hotter than any guess), another guess for the
  // step to come (1 and 2 layers ahead guess the same step), nor what this hint already placed.
  std::vector<uint8_t> pinned(L.slots.size(), 0);
  for (int64_t s : L.current) pinned[static_cast<size_t>(s)] = 1;
  for (size_t s = 0; s < L.slots.size(); ++s)
    if (L.slots[s].prefetched) pinned[s] = 1;
  bool ordered = false;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t have = find(L, experts[i]);
    if (have >= 0) {
      pinned[static_cast<size_t>(have)] = 1;
      continue;
    }
    L.absent_guess.resize(static_cast<size_t>(spec_.cfg.n_expert), 0);
    L.absent_guess[static_cast<size_t>(experts[i])] = 1;
    if (!guesses_pay(L)) continue;
    const int64_t entry = backend_.is_host() ? -1 : host_->find(layer, experts[i]);
    if (!backend_.is_host() && entry < 0) continue;
    const int64_t v = victim(L, pinned);
    if (v < 0) return;
    Slot& slot = L.slots[static_cast<size_t>(v)];
    pinned[static_cast<size_t>(v)] = 1;
    if (backend_.is_host()) {
      fill(layer, slot, experts[i], false);
    } else {
      if (!ordered) backend_.copy_after_compute();  // queued ops may still read the victims
      ordered = true;
      slot.copy = backend_.copy_to_device_async(
          slot.memory, host_->memory(entry),
          spec_.layers[static_cast<size_t>(layer)].expert_bytes(experts[i]));
      host_->set_last_copy(entry, slot.copy);
      host_->touch(entry);
      slot.expert = experts[i];
      slot.weights = view(layer, experts[i], static_cast<const uint8_t*>(slot.memory));
    }
    slot.prefetched = true;
    slot.stale = false;
    L.policy->filled(v, experts[i]);
    stats_[static_cast<size_t>(layer)].prefetched++;
  }
}

ExpertStats ExpertStore::layer_stats(int64_t layer) const {
  ExpertStats s = stats_[static_cast<size_t>(layer)];
  s.busy_seconds = static_cast<double>(busy_ns_[static_cast<size_t>(layer)].load()) * 1e-9;
  if (const ExpertPages* p = pages(layer)) {
    // Decode steps count on the device (every miss read from the RAM tier); micro-batches of
    // more than one row count here.
    uint64_t counts[2] = {};
    backend_.to_host(counts, p->counts, sizeof(counts));
    s.hits += counts[0];
    s.misses += counts[1];
    s.ram_hits += counts[1];
  }
  return s;
}

ExpertStats ExpertStore::total_stats() const {
  ExpertStats t;
  for (size_t l = 0; l < stats_.size(); ++l) t.add(layer_stats(static_cast<int64_t>(l)));
  return t;
}

void ExpertStore::reset_stats() {
  std::fill(stats_.begin(), stats_.end(), ExpertStats{});
  for (size_t l = 0; l < stats_.size(); ++l) {
    busy_ns_[l] = 0;
    if (const ExpertPages* p = pages(static_cast<int64_t>(l))) {
      const uint64_t zeros[2] = {};
      backend_.to_device(p->counts, zeros, sizeof(zeros));
    }
  }
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
        {"ram_hits", s.ram_hits},
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
          {"io", expert_io_name(io_mode_)},
          {"slots_per_layer", slots_},
          {"ram_tier_entries", ram_tier_},
          {"total", one(total_stats())},
          {"layers", layers}};
}

}  // namespace ts
