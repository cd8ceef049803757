// A one-line progress bar on stderr, redrawn in place; silent when stderr is not a terminal
// (logs get only the final line from the command itself).
#pragma once

#include <cstdint>
#include <string>

namespace ts::cli {

class Progress {
 public:
  Progress(std::string label, bool enabled);
  void update(int64_t done, int64_t total, const std::string& note);
  void finish();

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
};

}  // namespace ts::cli
