#include "vision/host_tower.h"

#include "vision/tower_checks.h"

namespace ts {

void HostTower::start(int threads, const std::string& tower) {
  threads = tower_threads(threads);
  cpu_ = make_cpu_backend(threads);
  pool_ = std::make_unique<ThreadPool>(threads);
  w_ = std::make_unique<HostWeights>(*source_, *cpu_, tower);
}

}  // namespace ts
