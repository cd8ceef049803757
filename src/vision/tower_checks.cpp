#include "vision/tower_checks.h"

#include <algorithm>
#include <thread>

#include "core/error.h"
#include "formats/gguf.h"
#include "model/model_source.h"

namespace ts {

std::string mmproj_projector_type(const GgufFile& g) {
  return g.get_string("clip.vision.projector_type")
      .value_or(g.get_string("clip.projector_type").value_or(""));
}

void require_projector(const ModelSource& s, const std::string& want, const std::string& tower) {
  const std::string type = mmproj_projector_type(*s.gguf());
  if (type != want)
    fail(ErrorKind::Model, s.path() + ": projector type '" + (type.empty() ? "(none)" : type) +
                               "' is not " + tower + "'s (" + want + ")");
}

void check_range(const ModelSource& s, const std::string& tower, const char* what, int64_t x,
                 int64_t lo, int64_t hi) {
  if (x < lo || x > hi)
    fail(ErrorKind::Model, s.path() + ": " + tower + " " + what + " " + std::to_string(x) +
                               " is out of range [" + std::to_string(lo) + ", " +
                               std::to_string(hi) + "]");
}

int tower_threads(int threads) {
  return threads > 0 ? threads
                     : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace ts
