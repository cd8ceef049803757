// Flags that llama.cpp users type by habit. Those turbospark has under another name are
// translated (-sys: --system; -cnv / -i with `run`: the `chat` command); those that mean nothing
// here are refused with a one-line explanation, instead of CLI11 reading "-ngl 99" as bundled
// short options ("Could not convert: --n-predict = gl").
#pragma once

#include <string>
#include <vector>

namespace ts::cli {

// The arguments after the program name, translated; a Usage error explains a refused flag.
std::vector<std::string> translate_llama_cpp_flags(std::vector<std::string> args);

}  // namespace ts::cli
