#include "moe_rank.h"

#include <random>

#include "moe/expert_parallel_ffn.h"
#include "runtime/footprint.h"

namespace ts::test {

MoeRank::MoeRank(const std::string& path, const EngineOptions& options, int64_t max_rows)
    : max_rows_(max_rows) {
  engine = Engine::open(path, options);
  const ArchConfig& c = engine->cfg();
  const auto B = static_cast<size_t>(max_rows);
  const size_t ff = B * static_cast<size_t>(ffn_row_floats(c));
  const size_t routed = B * static_cast<size_t>(c.n_expert_used * c.n_embd);
  buf.gate = alloc(2 * ff);
  buf.up = buf.gate + ff;
  buf.act = alloc(ff);
  buf.rows = alloc(routed);
  buf.out = alloc(routed);
  std::vector<const MoeLayerWeights*> layers;
  for (const LayerWeights& L : engine->layers()) layers.push_back(L.moe ? &L.routed : nullptr);
  moe = std::make_unique<MoeFfn>(engine->backend(), c, engine->experts(), layers, max_rows, buf,
                                 [this](size_t n) { return alloc(n); });
}

MoeRank::~MoeRank() {
  moe.reset();
  for (float* p : owned_) engine->backend().free(p);
}

float* MoeRank::alloc(size_t floats) {
  owned_.push_back(static_cast<float*>(engine->backend().alloc(floats * sizeof(float))));
  return owned_.back();
}

float* MoeRank::upload(const std::vector<float>& host) {
  float* p = alloc(host.size());
  engine->backend().to_device(p, host.data(), host.size() * sizeof(float));
  return p;
}

std::vector<float> MoeRank::run(int64_t l, const std::vector<float>& h, int64_t M) {
  Backend& b = engine->backend();
  float* in = upload(h);
  float* out = alloc(h.size());
  moe->route(l, in, M);
  moe->run(l, in, M, false, out);
  moe->sum_output(M, out);
  std::vector<float> host(h.size());
  b.to_host(host.data(), out, host.size() * sizeof(float));
  return host;
}

std::vector<float> MoeRank::run_parallel(Communicator& comm, const ExpertPlacement& place,
                                         int64_t l, const std::vector<float>& h, int64_t M) {
  Backend& b = engine->backend();
  ExpertParallelFfn ep(b, engine->cfg(), *moe, buf, comm, place, max_rows_);
  float* in = upload(h);
  float* out = alloc(h.size());
  moe->route(l, in, M);
  ep.run(l, in, M, out);
  std::vector<float> host(h.size());
  b.to_host(host.data(), out, host.size() * sizeof(float));
  return host;
}

std::vector<float> random_rows(int64_t M, int64_t d, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> h(static_cast<size_t>(M * d));
  for (float& v : h) v = dist(gen);
  return h;
}

std::vector<int64_t> moe_layers(const Engine& e) {
  std::vector<int64_t> out;
  for (size_t l = 0; l < e.layers().size(); ++l)
    if (e.layers()[l].moe) out.push_back(static_cast<int64_t>(l));
  return out;
}

}  // namespace ts::test
