// One rank of the expert-parallel tests: its own engine (backend and device as the options say)
// and MoE FFN with the buffers it was built with; and the random FFN inputs they share.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "moe/moe_ffn.h"
#include "parallel/communicator.h"
#include "parallel/partition.h"
#include "runtime/engine.h"

namespace ts::test {

struct MoeRank {
  MoeRank(const std::string& path, const EngineOptions& options, int64_t max_rows);
  ~MoeRank();
  MoeRank(const MoeRank&) = delete;
  MoeRank& operator=(const MoeRank&) = delete;
  // Layer l's output over h (host memory, M rows) from MoeFfn::run, a prefill's pass.
  std::vector<float> run(int64_t l, const std::vector<float>& h, int64_t M);
  // The same from this rank's ExpertParallelFfn over `comm` (every rank calls it with the same h).
  std::vector<float> run_parallel(Communicator& comm, const ExpertPlacement& place, int64_t l,
                                  const std::vector<float>& h, int64_t M);
  // Backend memory holding `host`, freed with the rank.
  float* upload(const std::vector<float>& host);
  float* alloc(size_t floats);

  std::unique_ptr<Engine> engine;
  FfnBuffers buf;
  std::unique_ptr<MoeFfn> moe;

 private:
  int64_t max_rows_;
  std::vector<float*> owned_;
};

std::vector<float> random_rows(int64_t M, int64_t d, uint32_t seed);
// The layers whose FFN is routed experts.
std::vector<int64_t> moe_layers(const Engine& e);

}  // namespace ts::test
