// Stop strings for streamed text: text that could be the beginning of a stop string is held
// back until it either completes the stop string (generation ends, the stop string itself is not
// shown) or turns out to be ordinary text (it is released).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ts {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops);

  // Appends newly generated text; returns the part that is safe to show now. Once a stop string
  // has appeared, stopped() is true and the returned text ends just before it.
  std::string push(std::string_view text);
  // At the end of generation: the text still held back.
  std::string flush();
  bool stopped() const { return stopped_; }
  // Once stopped: the stop string that appeared, and the text that came after it.
  const std::string& matched() const { return matched_; }
  const std::string& after() const { return after_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_, after_;
};

}  // namespace ts
