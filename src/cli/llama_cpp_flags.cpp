#include "cli/llama_cpp_flags.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace ts::cli {
namespace {

struct Note {
  std::vector<const char*> flags;
  const char* why;
};

const std::vector<Note>& notes() {
  static const std::vector<Note> n = {
      {{"-ngl", "--n-gpu-layers", "--gpu-layers"},
       "offloads layers in llama.cpp; here the whole model runs on --backend cuda (or cpu), "
       "--vram-budget bounding what stays on the GPU"},
      {{"-fa", "--flash-attn"}, "is always on here: attention is one fused, tiled kernel"},
      {{"--mlock", "--no-mmap"}, "has no counterpart: model files are always memory-mapped"},
      {{"-ctk", "-ctv", "--cache-type-k", "--cache-type-v"},
       "is --kv-type here (one type for keys and values)"},
      {{"-b", "-ub", "--batch-size", "--ubatch-size"}, "is --prefill-batch N here"},
      {{"-cb", "--cont-batching"}, "has no switch: serve always batches its requests together"},
      {{"-sm", "-ts", "-mg", "-dev", "--split-mode", "--tensor-split", "--main-gpu"},
       "has no counterpart: a run uses one device"},
      {{"--numa"}, "has no counterpart: threads are not placed by NUMA node"},
  };
  return n;
}

bool is_one_of(const std::string& arg, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return arg == n; });
}

}  // namespace

std::vector<std::string> translate_llama_cpp_flags(std::vector<std::string> args) {
  bool conversation = false;
  std::vector<std::string> out;
  for (std::string& arg : args) {
    const std::string name = arg.substr(0, arg.find('='));
    for (const Note& n : notes())
      if (std::find(n.flags.begin(), n.flags.end(), name) != n.flags.end())
        fail(ErrorKind::Usage, name + " " + n.why);
    if (arg == "-sys") {
      out.push_back("--system");
    } else if (is_one_of(arg, {"-cnv", "--conversation", "-i", "--interactive"})) {
      conversation = true;
    } else {
      out.push_back(std::move(arg));
    }
  }
  if (conversation) {
    // llama-cli's conversation mode is the chat command.
    if (!out.empty() && out[0] == "run")
      out[0] = "chat";
    else if (out.empty() || out[0] != "chat")
      out.insert(out.begin(), "chat");
  }
  return out;
}

}  // namespace ts::cli
