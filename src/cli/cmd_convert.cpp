// `turbospark convert HF_DIR OUT.gguf [--type f32|f16|bf16|q8_0] [--mmproj]`: a Hugging Face
// directory as the GGUF llama.cpp's convert_hf_to_gguf.py writes for it, or its vision tower as
// the converter's --mmproj file (cli/hf_convert.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "cli/hf_convert.h"
#include "cli/progress.h"
#include "core/error.h"

namespace ts::cli {
namespace {

struct ConvertArgs {
  std::string in;
  std::string out;
  std::string type = "f16";
  bool mmproj = false;
};

int run_convert(const ConvertArgs& a) {
  std::string lower;
  for (char c : a.type)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  const auto& types = convert_types();
  const auto type = std::find_if(types.begin(), types.end(),
                                 [&](const ConvertType& t) { return lower == t.name; });
  if (type == types.end())
    fail(ErrorKind::Usage, "convert: type '" + a.type + "' is not one of " + convert_type_names());
  Progress bar("convert", true);
  const auto t0 = std::chrono::steady_clock::now();
  const ConvertSummary s =
      write_converted(a.in, a.out, *type, a.mmproj, [&](uint64_t done, uint64_t total) {
        bar.update(static_cast<int64_t>(done >> 20), static_cast<int64_t>(total >> 20),
                   "M elements");
      });
  bar.finish();
  if (!s.warning.empty()) std::fprintf(stderr, "convert: warning: %s\n", s.warning.c_str());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "convert: wrote %s (%s, %lld tensors, %.3f GB) in %.1f s\n", a.out.c_str(),
               type->name, static_cast<long long>(s.tensors), static_cast<double>(s.bytes) / 1e9,
               secs);
  return 0;
}

}  // namespace

Runner add_convert(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "convert", "Write a Hugging Face directory as the GGUF llama.cpp's converter writes");
  auto a = std::make_shared<ConvertArgs>();
  sub->add_option("input", a->in,
                  "Hugging Face model directory (config.json, safetensors, tokenizer)")
      ->required();
  sub->add_option("output", a->out, "Output GGUF file")->required();
  sub->add_option("--type,--outtype", a->type,
                  "Weight type: " + convert_type_names() + " (default f16)");
  sub->add_flag("--mmproj", a->mmproj,
                "Write the vision tower and projector (llama.cpp's mmproj GGUF) instead of the "
                "text model");
  return [a] { return run_convert(*a); };
}

}  // namespace ts::cli
