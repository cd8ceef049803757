// A vision tower that runs on the host: its file, a CPU backend and thread pool of its own, and the
// checked reader of its weights. A tower opens its file (source_), reads and checks its
// configuration from it, then start()s the rest before it loads its tensors.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "core/thread_pool.h"
#include "model/model_source.h"
#include "runtime/host_weights.h"
#include "vision/vision_tower.h"

namespace ts {

class HostTower : public VisionTower {
 public:
  const std::string& path() const override { return source_->path(); }

 protected:
  // The backend, pool and weight reader on tower_threads(threads); `tower` names it in errors.
  void start(int threads, const std::string& tower);

  std::unique_ptr<ModelSource> source_;
  std::unique_ptr<Backend> cpu_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<HostWeights> w_;
};

}  // namespace ts
