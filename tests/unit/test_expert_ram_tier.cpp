// The pinned host-RAM tier of expert streaming on device backends (--ram-budget), run on this
// machine through a CPU backend that poses as a device backend: streaming through the tier never
// changes a number, whatever its size; a VRAM miss the tier holds is counted and reads nothing
// from the file; the CPU backend and a budget below one expert are refused before any allocation.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "backend/backend.h"
#include "core/error.h"
#include "fixture_models.h"
#include "runtime/engine.h"
#include "runtime/forward.h"
#include "runtime/kv_cache.h"
#include "runtime/session.h"
#include "test_paths.h"

namespace ts {
namespace {

// The CPU backend behind a device backend's face: is_host() is false, so the engine reads weights
// through upload_weight() and the expert store takes its device path (pinned host entries, async
// copies). The copies run in order on a thread of their own, each after a short delay, as on a
// copy stream, and compute_waits_for() does not block the host: like a device stream, the next
// matmul and the next read back (the ops that read expert slots and expert tables) wait. A read
// that overwrote a host entry before the copy out of it ran, or compute that used a slot or a
// table entry before its copy landed, would change the logits. With `indexes`, it runs one
// token's experts by id (the Backend defaults of matmul_indexed and combine_experts), as CUDA
// does: the engine then keeps tables of the experts' slots. Counts allocations.
class DeviceLike final : public Backend {
 public:
  DeviceLike(int64_t* allocs, bool indexes, bool pages)
      : cpu_(make_cpu_backend(2)),
        allocs_(allocs),
        indexes_(indexes),
        pages_(pages),
        copier_([this] { copy_loop(); }) {}
  ~DeviceLike() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    copier_.join();
  }
  uint64_t copy_to_device_async(void* dst, const void* src, size_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    copies_.push_back(Copy{dst, src, bytes});
    cv_.notify_all();
    return queued_ += 1;
  }
  void host_waits_for(uint64_t ticket) override { wait_for(ticket); }
  void compute_waits_for(uint64_t ticket) override {
    std::lock_guard<std::mutex> lock(mu_);
    compute_after_ = std::max(compute_after_, ticket);
  }
  void synchronize() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_ == queued_; });
  }
  std::string name() const override { return "device-like"; }
  void* alloc(size_t bytes) override {
    ++*allocs_;
    return cpu_->alloc(bytes);
  }
  void free(void* p) override { cpu_->free(p); }
  void to_device(void* dst, const void* src, size_t bytes) override {
    cpu_->to_device(dst, src, bytes);
  }
  void to_host(void* dst, const void* src, size_t bytes) override {
    wait_for_compute_copies();
    cpu_->to_host(dst, src, bytes);
  }
  bool indexes_experts_on_device() const override { return indexes_; }
  // Paging through the Backend's host defaults: the rule the CUDA kernels run, on host memory.
  bool pages_experts(DType /*type*/) const override { return pages_; }
  void* alloc_host_pinned(size_t bytes) override {
    ++*allocs_;
    return Backend::alloc_host_pinned(bytes);
  }
  // The CPU backend's weights are views of the caller's buffer, which a device backend's caller
  // frees after the upload: copy.
  Weight upload_weight(DType dtype, int64_t rows, int64_t cols, size_t row_stride,
                       const void* host) override {
    const size_t bytes = static_cast<size_t>(rows) * row_stride;
    void* mem = alloc(bytes);
    std::memcpy(mem, host, bytes);
    return Weight{dtype, rows, cols, row_stride, mem};
  }
  void release_weight(Weight& w) override {
    free(const_cast<void*>(w.data));
    w = Weight{};
  }
  void embed(const Weight& table, const int32_t* ids, int64_t M, float scale, float* out) override {
    cpu_->embed(table, ids, M, scale, out);
  }
  void rms_norm(const float* x, const float* w, int64_t M, int64_t n, float eps, bool plus_one,
                float* out) override {
    cpu_->rms_norm(x, w, M, n, eps, plus_one, out);
  }
  void rms_norm_heads(float* x, const float* w, int64_t M, int64_t n_heads, int64_t head_dim,
                      float eps, bool plus_one) override {
    cpu_->rms_norm_heads(x, w, M, n_heads, head_dim, eps, plus_one);
  }
  void matmul(const Weight& w, const float* x, int64_t M, float* y) override {
    wait_for_compute_copies();
    cpu_->matmul(w, x, M, y);
  }
  void add_bias(float* y, const float* b, int64_t M, int64_t n) override {
    cpu_->add_bias(y, b, M, n);
  }
  void add(float* y, const float* x, int64_t n) override { cpu_->add(y, x, n); }
  void zero(float* x, int64_t n) override { cpu_->zero(x, n); }
  void rope(float* x, int64_t M, int64_t n_heads, const int32_t* pos, const RopeArgs& r) override {
    cpu_->rope(x, M, n_heads, pos, r);
  }
  void kv_store(const KvView& kv, const float* k, const float* v, int64_t M,
                const int32_t* pos) override {
    cpu_->kv_store(kv, k, v, M, pos);
  }
  void attention(const float* q, const KvView& kv, int64_t M, const int32_t* pos,
                 const AttentionArgs& a, float* out) override {
    cpu_->attention(q, kv, M, pos, a, out);
  }
  void glu(Glu act, const float* gate, const float* up, int64_t rows, int64_t n, int64_t stride,
           float* out) override {
    cpu_->glu(act, gate, up, rows, n, stride, out);
  }
  void conv_silu(float* x, int64_t M, int64_t channels, const float* taps, int64_t kernel,
                 float* window) override {
    cpu_->conv_silu(x, M, channels, taps, kernel, window);
  }
  void delta_rule(const float* qkv, const float* beta, const float* alpha, int64_t M,
                  const DeltaRuleArgs& a, float* state, float* out) override {
    cpu_->delta_rule(qkv, beta, alpha, M, a, state, out);
  }
  void add_gated_rows(float* y, const float* x, const float* g, int64_t M, int64_t n) override {
    cpu_->add_gated_rows(y, x, g, M, n);
  }
  void scatter_add_rows(float* y, const float* x, const int32_t* idx, const float* scale, int64_t M,
                        int64_t n) override {
    cpu_->scatter_add_rows(y, x, idx, scale, M, n);
  }
  void gather_rows(const float* x, const int32_t* idx, int64_t M, int64_t n, float* out) override {
    cpu_->gather_rows(x, idx, M, n, out);
  }
  void softcap(float* x, int64_t n, float cap) override { cpu_->softcap(x, n, cap); }

 private:
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  void wait_for(uint64_t ticket) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_ >= ticket; });
  }
  void wait_for_compute_copies() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_ >= compute_after_; });
  }
  void copy_loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !copies_.empty(); });
      if (copies_.empty()) return;
      const Copy c = copies_.front();
      copies_.pop_front();
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      std::memcpy(c.dst, c.src, c.bytes);
      lock.lock();
      ++done_;
      cv_.notify_all();
    }
  }

  std::unique_ptr<Backend> cpu_;
  int64_t* allocs_;
  bool indexes_;
  bool pages_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Copy> copies_;
  uint64_t queued_ = 0, done_ = 0;  // tickets: the n-th copy queued is ticket n
  uint64_t compute_after_ = 0;      // the copy the next matmul waits for
  bool stop_ = false;
  std::thread copier_;
};

EngineOptions options(int64_t slots, uint64_t ram_budget) {
  EngineOptions o;
  o.ctx = 64;
  o.kv_type = DType::F16;
  o.prefill_batch = 16;
  o.expert_slots = slots;
  o.ram_budget = ram_budget;
  return o;
}

std::vector<float> feed(Engine& engine, const std::vector<int32_t>& ids, bool decode) {
  Session s(engine);
  const size_t V = static_cast<size_t>(engine.cfg().n_vocab);
  std::vector<float> logits(ids.size() * V);
  if (decode) {
    for (size_t i = 0; i < ids.size(); ++i) s.feed(&ids[i], 1, logits.data() + i * V, false);
  } else {
    s.feed(ids.data(), static_cast<int64_t>(ids.size()), logits.data(), true);
  }
  return logits;
}

std::unique_ptr<Engine> open_device_like(const std::string& path, const EngineOptions& o,
                                         int64_t* allocs, bool indexes = false,
                                         bool pages = false) {
  return Engine::open(path, o, std::make_unique<DeviceLike>(allocs, indexes, pages));
}

int64_t moe_experts(const ModelSpec& spec) {
  int64_t layers = 0;
  for (uint8_t m : spec.cfg.layer_moe) layers += m;
  return layers * spec.cfg.n_expert;
}

class RamTier : public ::testing::TestWithParam<test::FixtureForm> {};

TEST_P(RamTier, StreamingThroughTheTierIsBitIdenticalToResident) {
  const test::FixtureForm& f = GetParam();
  const std::vector<int32_t> ids = test::fixture_prompt(f);
  auto spec = open_model_spec(f.path);
  const int64_t k = spec->cfg.n_expert_used, all = moe_experts(*spec);
  const uint64_t stride = spec->expert_stride;
  // Rows grouped on the host (prefill, decode), by expert id (decode), by id with the next
  // layer's experts guessed and prefetched from the tier, paged on the "device" (prefill through
  // the slots by the host, decode by id) when the tier holds every expert.
  struct Mode {
    bool decode, indexes, prefetch, pages;
  };
  for (const auto& [decode, indexes, prefetch, pages] : {Mode{false, false, false, false},
                                                         {true, false, false, false},
                                                         {true, true, false, false},
                                                         {true, true, true, false},
                                                         {false, true, false, true},
                                                         {true, true, false, true}}) {
    EngineOptions resident_opts = options(0, 0);
    resident_opts.backend = "cpu";
    resident_opts.threads = 2;
    auto cpu = Engine::open(f.path, resident_opts);
    const std::vector<float> resident = feed(*cpu, ids, decode);
    // 0: the staging buffers alone; 1 expert (every read reuses the one entry); a few (fewer
    // than a wave's misses); every expert.
    // A prefetch evicts none of the slots the layer's last token used nor those its guesses
    // hold: it needs room for k more, and then there must still be experts left to stream.
    const int64_t slots = prefetch ? 2 * k : k;
    if (slots >= spec->cfg.n_expert) continue;
    for (int64_t entries : {int64_t{0}, int64_t{1}, k + 1, all}) {
      int64_t allocs = 0;
      const uint64_t budget =
          entries == 0 ? 0 : static_cast<uint64_t>(entries) * stride + stride / 2;
      EngineOptions o = options(slots, budget);
      o.expert_prefetch = prefetch;
      auto engine = open_device_like(f.path, o, &allocs, indexes, pages);
      ASSERT_EQ(engine->experts().ram_tier_entries(), entries);
      ASSERT_EQ(engine->experts().pages_on_device(), pages && entries == all);
      ASSERT_EQ(engine->footprint().ram_tier, static_cast<uint64_t>(entries) * stride);
      for (int pass = 0; pass < 2; ++pass) {
        const std::vector<float> streamed = feed(*engine, ids, decode);
        ASSERT_EQ(0, std::memcmp(resident.data(), streamed.data(), resident.size() * sizeof(float)))
            << (decode ? "decode" : "prefill") << (indexes ? " by expert id" : "")
            << (prefetch ? " with prefetch" : "") << (pages ? " paged" : "")
            << " with a RAM tier of " << entries << " experts, pass " << pass;
      }
      const ExpertStats st = engine->experts().total_stats();
      EXPECT_GT(st.misses, 0u);
      if (entries == 0) {
        EXPECT_EQ(st.ram_hits, 0u);
      }
      if (entries == all) {
        EXPECT_GT(st.ram_hits, 0u);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(MoeFixtures, RamTier,
                         ::testing::ValuesIn(test::fixture_forms({"mixtral", "qwen3_moe",
                                                                  "minimax_m2"})),
                         [](const auto& i) { return i.param.fixture + "_" + i.param.form; });

const std::string& bundled() {
  static const std::string path = test::repo_dir() + "/models/tiny-moe-q8_0.gguf";
  return path;
}

const std::vector<int32_t> kPrompt = {1, 17, 300, 42, 42, 9, 1000, 77, 5, 2048, 3, 64};

// The bundled model paged on the "device": k + 2 slots a layer, a RAM tier of every expert.
std::unique_ptr<Engine> open_paged(const ModelSpec& spec, int64_t* allocs) {
  const uint64_t tier = static_cast<uint64_t>(moe_experts(spec)) * spec.expert_stride;
  auto engine =
      open_device_like(bundled(), options(spec.cfg.n_expert_used + 2, tier), allocs, true, true);
  EXPECT_TRUE(engine->experts().pages_on_device());
  return engine;
}

TEST(RamTierStats, ASecondPassOverTheSamePromptReadsNothingFromTheFile) {
  auto spec = open_model_spec(bundled());
  const int64_t all = moe_experts(*spec);
  for (bool indexes : {false, true}) {
    SCOPED_TRACE(indexes ? "experts by id" : "rows grouped on the host");
    int64_t allocs = 0;
    auto engine = open_device_like(
        bundled(),
        options(spec->cfg.n_expert_used, static_cast<uint64_t>(all) * spec->expert_stride), &allocs,
        indexes);
    ASSERT_EQ(engine->experts().ram_tier_entries(), all);
    feed(*engine, kPrompt, true);
    const ExpertStats first = engine->experts().total_stats();
    ASSERT_GT(first.misses, 0u);
    // Every VRAM miss of the first pass read the file, unless the tier already held the expert.
    EXPECT_EQ(first.misses - first.ram_hits, first.bytes_read / spec->layers[0].expert_bytes(0));
    engine->experts().reset_stats();
    feed(*engine, kPrompt, true);
    const ExpertStats second = engine->experts().total_stats();
    ASSERT_GT(second.misses, 0u) << "top-k slots must miss in VRAM for this test to mean anything";
    EXPECT_EQ(second.ram_hits, second.misses);
    EXPECT_EQ(second.bytes_read, 0u);
  }
}

// Paged on the device, prompts and decode steps alternating: the slots pass from the device's
// paging to the host's (a prompt) and back with what they hold, and every pass gives the
// resident engine's bits.
TEST(RamTierStats, PagedOnTheDeviceHandsTheSlotsOverBetweenPromptsAndDecode) {
  auto spec = open_model_spec(bundled());
  // Against the same backend with every expert resident (the CPU backend's own would take its
  // panel kernels for this q8_0 model, with other bits).
  int64_t allocs = 0;
  auto resident = open_device_like(bundled(), options(0, 0), &allocs, true);
  const std::vector<float> prefill = feed(*resident, kPrompt, false),
                           decode = feed(*resident, kPrompt, true);
  auto engine = open_paged(*spec, &allocs);
  for (const bool step : {false, true, true, false, true}) {
    const std::vector<float>& want = step ? decode : prefill;
    const std::vector<float> got = feed(*engine, kPrompt, step);
    ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
        << (step ? "decode" : "prompt");
  }
  const ExpertStats st = engine->experts().total_stats();
  EXPECT_EQ(st.ram_hits, st.misses);
  EXPECT_EQ(st.bytes_read, 0u);
}

// Paged on the device: every expert is read into the tier at open, none from the file after;
// each routed expert of each layer and token is one hit or one miss, and every miss is served by
// the tier; a second pass over the prompt finds what the first left in the slots.
TEST(RamTierStats, PagedOnTheDeviceCountsEveryLookupAndReadsNoFile) {
  auto spec = open_model_spec(bundled());
  const int64_t all = moe_experts(*spec), k = spec->cfg.n_expert_used;
  int64_t allocs = 0;
  auto engine = open_paged(*spec, &allocs);
  const auto lookups = static_cast<uint64_t>(all / spec->cfg.n_expert * k) * kPrompt.size();
  uint64_t first_misses = 0;
  for (int pass = 0; pass < 2; ++pass) {
    engine->experts().reset_stats();
    feed(*engine, kPrompt, true);
    const ExpertStats st = engine->experts().total_stats();
    EXPECT_EQ(st.hits + st.misses, lookups) << "pass " << pass;
    EXPECT_GT(st.misses, 0u) << "pass " << pass;
    EXPECT_EQ(st.ram_hits, st.misses) << "pass " << pass;
    EXPECT_EQ(st.bytes_read, 0u) << "pass " << pass;
    if (pass == 0) first_misses = st.misses;
    if (pass == 1) {
      EXPECT_LE(st.misses, first_misses);
    }
  }
}

TEST(RamTierStats, PrefetchedGuessesAreCopiedFromTheTierAndUsed) {
  auto spec = open_model_spec(bundled());
  const int64_t all = moe_experts(*spec), k = spec->cfg.n_expert_used;
  std::vector<float> logits[2];
  for (bool prefetch : {false, true}) {
    int64_t allocs = 0;
    EngineOptions o = options(2 * k, static_cast<uint64_t>(all) * spec->expert_stride);
    o.expert_prefetch = prefetch;
    auto engine = open_device_like(bundled(), o, &allocs, true);
    ASSERT_EQ(engine->experts().prefetching(), prefetch);
    feed(*engine, kPrompt, true);  // fills the tier
    engine->experts().reset_stats();
    logits[prefetch] = feed(*engine, kPrompt, true);
    const ExpertStats st = engine->experts().total_stats();
    if (prefetch) {
      EXPECT_GT(st.prefetched, 0u);
      EXPECT_GT(st.prefetch_hits, 0u);
      EXPECT_EQ(st.bytes_read, 0u);
    }
  }
  EXPECT_EQ(0, std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)));
}

TEST(RamTierStats, ATierOfOneExpertStillReadsTheFileOnASecondPass) {
  auto spec = open_model_spec(bundled());
  int64_t allocs = 0;
  auto engine =
      open_device_like(bundled(), options(spec->cfg.n_expert_used, spec->expert_stride), &allocs);
  feed(*engine, kPrompt, true);
  engine->experts().reset_stats();
  feed(*engine, kPrompt, true);
  const ExpertStats second = engine->experts().total_stats();
  EXPECT_GT(second.bytes_read, 0u);
  EXPECT_LT(second.ram_hits, second.misses);
}

// Three sequences decoding together. On a backend that runs experts by id (as CUDA does): with
// every expert resident each token's experts run by id, streamed they are grouped on the host as
// one-row groups. On one that groups resident experts on the host too (as the CPU does): whole
// groups both ways. Either way streamed gives the bits of resident, and each sequence the logits
// of its own decode (to the rounding of the matmuls whose tiles follow the row count, as in
// BatchedForward).
TEST(RamTierStats, BatchedDecodeStreamedIsBitIdenticalToResident) {
  const std::vector<std::vector<int32_t>> prompts = {
      {5, 17, 300, 2}, {9, 9, 40}, {100, 7, 8, 9, 10}};
  const std::vector<int32_t> next = {44, 3, 501};
  const auto batched = [&](Engine& engine) {
    const auto V = static_cast<size_t>(engine.cfg().n_vocab);
    Forward forward(engine, 16);
    std::vector<std::unique_ptr<KvCache>> kv;
    std::vector<std::vector<float>> logits(3, std::vector<float>(V));
    std::vector<SeqChunk> step;
    for (size_t s = 0; s < 3; ++s) {
      kv.push_back(std::make_unique<KvCache>(engine, 64));
      forward.run({SeqChunk{kv[s].get(), prompts[s].data(), static_cast<int64_t>(prompts[s].size()),
                            nullptr, false}});
      step.push_back({kv[s].get(), &next[s], 1, logits[s].data(), false});
    }
    forward.run(step);
    return logits;
  };
  for (const bool indexes : {true, false}) {
    int64_t allocs = 0;
    auto resident = open_device_like(bundled(), options(0, 0), &allocs, indexes);
    const auto V = static_cast<size_t>(resident->cfg().n_vocab);
    const std::vector<std::vector<float>> want = batched(*resident);
    const int64_t k = resident->cfg().n_expert_used;
    auto streamed = open_device_like(bundled(), options(k + 1, 0), &allocs, indexes);
    ASSERT_TRUE(streamed->experts().streaming());
    EXPECT_EQ(batched(*streamed), want) << (indexes ? "by id" : "grouped");
    for (size_t s = 0; s < 3; ++s) {
      std::vector<float> alone(V);
      Session session(*resident);
      session.feed(prompts[s].data(), static_cast<int64_t>(prompts[s].size()), alone.data(), false);
      session.feed(&next[s], 1, alone.data(), false);
      const auto c = test::compare_logits(want[s], alone, static_cast<int64_t>(V));
      EXPECT_LE(c.rel, 1e-6) << (indexes ? "by id" : "grouped") << ", sequence " << s << ": "
                             << c.summary();
    }
  }
}

TEST(RamTierRefusals, TheCpuBackendRefusesARamBudget) {
  EngineOptions o = options(2, uint64_t{1} << 30);
  o.backend = "cpu";
  try {
    Engine::open(bundled(), o);
    FAIL() << "--ram-budget accepted on the CPU backend";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("page cache"), std::string::npos) << e.what();
  }
}

TEST(RamTierRefusals, ABudgetBelowOneExpertIsRefusedBeforeAnyAllocation) {
  auto spec = open_model_spec(bundled());
  int64_t allocs = 0;
  try {
    open_device_like(bundled(), options(2, spec->expert_stride - 1), &allocs);
    FAIL() << "a RAM tier smaller than one expert was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Budget);
    EXPECT_NE(std::string(e.what()).find("smaller than one expert"), std::string::npos) << e.what();
  }
  EXPECT_EQ(allocs, 0);
}

TEST(RamTierRefusals, TheCliRefusesRamBudgetOnTheCpuInOneLine) {
  std::string out;
  EXPECT_EQ(
      test::run_command(test::binary_path() + " run --backend cpu --ram-budget 1G -p hi", &out), 1);
  EXPECT_NE(out.find("--ram-budget applies to device backends only"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one line: " << out;
}

}  // namespace
}  // namespace ts
