#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>

namespace ts::cli {

Progress::Progress(std::string label, bool enabled)
    : label_(std::move(label)), enabled_(enabled && ::isatty(2)) {}

void Progress::update(int64_t done, int64_t total, const std::string& note) {
  if (!enabled_ || total <= 0) return;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / total);
  std::fprintf(stderr, "\r%s [%.*s%*s] %lld/%lld %s", label_.c_str(), filled,
               "==============================", kWidth - filled, "", static_cast<long long>(done),
               static_cast<long long>(total), note.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (drawn_) std::fprintf(stderr, "\n");
  drawn_ = false;
}

}  // namespace ts::cli
