// ExpertStore: where each routed expert's weights are when a layer needs them. Resident mode
// loads every expert at open; streaming mode keeps a fixed pool of slots per MoE layer and reads
// the experts the router picks from the model file (positional reads, never through the mmap),
// evicting by a cache policy. Streaming never changes a number: the same bytes reach the same
// kernels in the same order.
#pragma once

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "moe/cache_policy.h"
#include "moe/host_tier.h"
#include "moe/io_queue.h"
#include "moe/uring_reader.h"

namespace ts {

struct ModelSpec;

// One expert's projections, laid end to end in one piece of memory. When gate and up have one
// type and width, gate_up is the two as one stacked matrix (one matmul computes both); otherwise
// its rows are 0.
struct ExpertWeights {
  Weight gate, up, down;
  Weight gate_up;
};

// The experts of one MoE layer for Backend::matmul_indexed: per projection, the data pointers of
// every expert's weight (backend memory, indexed by expert id) and the shape they share.
struct ExpertTable {
  const void* const* gate = nullptr;
  const void* const* up = nullptr;
  const void* const* down = nullptr;
  Weight gate_shape, up_shape, down_shape;
  Weight gate_up_shape;  // gate and up stacked (from the `gate` pointers); rows 0 when they aren't
};

struct ExpertStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t bytes_read = 0;     // from the model file: misses in every tier
  uint64_t ram_hits = 0;       // VRAM misses the pinned RAM tier served (device backends)
  uint64_t prefetched = 0;     // reads issued by prefetch()
  uint64_t prefetch_hits = 0;  // hits on experts a prefetch brought in
  double read_seconds = 0;     // wall time compute spent waiting on expert reads
  double busy_seconds = 0;     // time the reads themselves took (summed over reader threads)
  // Decode steps: of the experts routed, how many the router of a layer d = 1, 2 MoE layers
  // before had predicted (ahead_total counts the routed experts that had a prediction).
  uint64_t ahead_hits[2] = {};
  uint64_t ahead_total[2] = {};
  void add(const ExpertStats& o);
};

class ExpertStore {
 public:
  struct Options {
    int64_t slots_per_layer = 0;  // 0 (or >= n_expert): resident
    CachePolicyKind policy = CachePolicyKind::Lru;
    // Accept prefetch() hints (streaming; on a device backend, from the RAM tier only).
    bool prefetch = false;
    // Device backends, streaming: experts the pinned host-RAM tier holds (0: no RAM tier).
    int64_t ram_tier_entries = 0;
    // Host backends, streaming: how the experts are read (io_uring when this build and the
    // kernel allow it, else pread).
    ExpertIo io = ExpertIo::Auto;
  };
  ExpertStore(const ModelSpec& spec, Backend& backend, Options options);
  ~ExpertStore();

  bool streaming() const { return streaming_; }
  bool prefetching() const { return prefetch_; }
  int64_t slots_per_layer() const { return slots_; }
  int64_t ram_tier_entries() const { return ram_tier_; }
  ExpertIo io() const { return io_mode_; }

  // Starts making the `n` distinct experts of `layer` present (n <= slots_per_layer()) and
  // returns at once; ready(layer, i) then waits for the i-th of them, so compute can start on
  // the first expert that is ready. Experts already present count as hits.
  void acquire(int64_t layer, const int32_t* experts, int64_t n);
  // The weights of the i-th expert of the last acquire() on `layer`, once read. A failed read
  // throws (ErrorKind::Runtime) naming the layer and expert.
  const ExpertWeights& ready(int64_t layer, int64_t i);
  // A hint that `layer` will soon need these experts (best first): reads the absent ones into
  // slots the layer's last acquire() does not hold, in the background (device backends: copies
  // those the RAM tier holds; a file read would delay the copies compute waits for). No-op
  // unless prefetching.
  void prefetch(int64_t layer, const int32_t* experts, int64_t n);
  // A decode step's routing of `layer`: `hits` of its `n` experts were predicted `distance` (1 or
  // 2) MoE layers before (statistics only).
  void note_lookahead(int64_t layer, int distance, int64_t hits, int64_t n);

  // Streaming on a device backend, when the layer's experts share their shapes: the layer's
  // table in backend memory. Its entries are right for the experts present after
  // publish_table(); the others' are stale.
  const ExpertTable* table(int64_t layer) const;
  // Points the table at the slots of every expert of the last acquire() on `layer` (call after
  // ready() for each): ops queued afterwards read the updated table.
  void publish_table(int64_t layer);

  // Resident mode only: expert `expert` of `layer`, always present.
  const ExpertWeights& resident(int64_t layer, int32_t expert) const;

  // Streaming on a device backend that pages experts itself (Backend::pages_experts), when the
  // RAM tier holds every expert and the cache policy is LRU: every expert is read into the tier
  // at open, and a decode step's experts are made present on the device, without the host, by
  // page_experts() / commit_experts() over the layer's state (null when not paging).
  bool pages_on_device() const { return paging_; }
  const ExpertPages* pages(int64_t layer) const;
  // Paging on the device, around a micro-batch of more than one row: acquire() and ready() then
  // fill the layer's slots from the RAM tier with bulk copies (reading every routed expert in
  // place from host memory measured several times slower: docs/PERFORMANCE.md, "Measured
  // choices"), starting from what the device's paging left in them; afterwards the device's state
  // is rebuilt from the host's.
  void slots_to_host(int64_t layer);
  void slots_to_device(int64_t layer);

  ExpertStats layer_stats(int64_t layer) const;
  ExpertStats total_stats() const;
  void reset_stats();
  nlohmann::json stats_json() const;

 private:
  struct Slot {
    int32_t expert = -1;  // -1: empty (or its last read failed)
    void* memory = nullptr;
    ExpertWeights weights;
    std::shared_future<void> loading;  // the read that fills it (valid once one was issued)
    bool prefetched = false;           // filled by prefetch() and not used since
    bool stale = false;          // a prefetch its layer's step passed by unused: the first to evict
    uint64_t copy = 0;           // device backends: the ticket of prefetch()'s copy into the slot
    UringReader::Ticket ticket;  // its read through io_uring, if that is how it was read
  };
  struct Layer {
    std::vector<Slot> slots;
    std::unique_ptr<CachePolicy> policy;
    std::vector<int64_t> current;       // slots of the last acquire(), in request order
    std::vector<int64_t> current_read;  // device backends: index in reads_ per entry, or -1
    // Whether guesses pay here: of the experts guessed while absent (read or not), how many the
    // next step used. A wrong guess costs a read; only a right one saves one.
    uint64_t absent_guessed = 0, absent_right = 0;
    std::vector<uint8_t> absent_guess;  // per expert: guessed while absent, for the coming step
    // The table (streaming on a device): in backend memory, its host mirror in pinned memory
    // (the source of the copies that update it) and the ticket of the last such copy.
    ExpertTable table;
    const void** device_table = nullptr;
    const void** mirror = nullptr;
    uint64_t table_copy = 0;
    // Paging on the device: its state, the allocations holding it, and every expert's view of
    // the RAM tier.
    ExpertPages pages;
    std::vector<void*> pages_memory;
    std::vector<ExpertWeights> host_views;
  };
  // Device backends: one miss of the last acquire(). Unless the RAM tier holds the expert, it is
  // read into a host tier entry in chunks by the reader threads; then copied to its slot
  // asynchronously.
  struct DeviceRead {
    int64_t slot = 0;
    int32_t expert = 0;
    int64_t entry = 0;    // in host_
    bool cached = false;  // the RAM tier held it: no read
    int64_t then = -1;    // the read (index in reads_) to start once this one's copy is queued
    std::vector<std::shared_future<void>> chunks;
    bool done = false;
  };
  void read_expert(int64_t layer, int32_t expert, void* dst);
  void read_range(int64_t layer, int32_t expert, uint8_t* dst, uint64_t begin, uint64_t end);
  void fill(int64_t layer, Slot& slot, int32_t expert, bool demand);
  // fill()'s read through io_uring; false when the expert's slices need pread.
  bool fill_uring(int64_t layer, Slot& slot, int32_t expert, bool demand);
  void start_reads(int64_t layer, const std::vector<std::pair<int64_t, int32_t>>& misses);
  void submit_read(int64_t layer, size_t k);
  void finish_read(int64_t layer, size_t k);
  void drain_reads();
  int64_t find(const Layer& L, int32_t expert) const;
  // The slot to fill among the unpinned: an empty or stale one, else the policy's victim.
  int64_t victim(const Layer& L, const std::vector<uint8_t>& pinned) const;
  // Counts how many of the experts guessed absent for this step it uses (acquire()).
  void score_absent_guesses(Layer& L, const int32_t* experts, int64_t n);
  bool guesses_pay(const Layer& L) const;
  ExpertWeights view(int64_t layer, int32_t expert, const uint8_t* base) const;
  void make_table(int64_t layer);
  void pack_resident(int64_t layer);
  // The expert's matrices in the backend's packed layout, `pack` (pack_weight or
  // pack_expert_weight) applied to gate and up stacked when their views stay valid, else to each.
  template <class Pack>
  void pack_expert(ExpertWeights& w, const Pack& pack) const;
  bool can_page(const Options& options) const;
  void open_reader(ExpertIo io);
  void start_paging();
  void make_pages(int64_t layer);

  const ModelSpec& spec_;
  Backend& backend_;
  bool streaming_ = false;
  bool prefetch_ = false;
  bool paging_ = false;
  int64_t slots_ = 0;
  std::vector<Layer> layers_;
  std::vector<ExpertStats> stats_;
  std::unique_ptr<std::atomic<uint64_t>[]> busy_ns_;  // per layer, written by reader threads
  int64_t ram_tier_ = 0;
  ExpertIo io_mode_ = ExpertIo::Pread;
  std::unique_ptr<HostTier> host_;  // device backends: the staging buffers or the RAM tier
  std::vector<DeviceRead> reads_;   // the misses of the last acquire() on a device backend
  int64_t reads_layer_ = 0;         // the layer of reads_
  std::vector<int64_t> wave_user_;  // per host entry: the last read of reads_ using it, or -1
  std::unique_ptr<IoQueue> io_;
  std::unique_ptr<UringReader> reader_;  // host backends, streaming, unless pread; after io_: its
                                         // completions hand packing to io_
};

}  // namespace ts
