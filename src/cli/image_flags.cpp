#include "cli/image_flags.h"

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/tokenizer.h"
#include "vision/vision_tower.h"

namespace ts::cli {
namespace {

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// config.json of an HF directory, or null.
nlohmann::json hf_config(const std::string& model_path) {
  if (!is_dir(model_path)) return nullptr;
  std::ifstream in(model_path + "/config.json");
  return in ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json();
}

}  // namespace

std::vector<uint8_t> read_image_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::Usage, "--image: cannot read '" + path + "'");
  return {std::istreambuf_iterator<char>(in), {}};
}

void add_image_flags(CLI::App* app, ImageFlags& f, bool files) {
  if (files)
    app->add_option("--image", f.images,
                    "An image (PNG, JPEG, WebP) for a vision model; repeatable");
  app->add_option("--mmproj", f.mmproj,
                  "The vision tower's GGUF (llama.cpp's mmproj); an HF directory has its own");
  app->add_option("--image-token", f.image_token,
                  "The image placeholder token id (default: from the model)");
  app->add_option("--image-min-pixels", f.min_pixels,
                  "The processor's smallest image in pixels (default: the model's)");
  app->add_option("--image-max-pixels", f.max_pixels,
                  "The processor's largest image in pixels (default: the model's)");
  app->add_option("--image-max-tokens", f.max_tokens,
                  "The most tokens an image takes (Gemma 4: 70, 140, 280, 560 or 1120; default: "
                  "preprocessor_config.json's max_soft_tokens, 280 for an mmproj GGUF)");
}

std::shared_ptr<VisionTower> open_vision(const ImageFlags& f, Engine& engine,
                                         const std::string& model_path, int threads,
                                         bool required) {
  const ArchConfig& c = engine.cfg();
  const nlohmann::json cfg = hf_config(model_path);
  const bool own_tower = cfg.is_object() && cfg.contains("vision_config");
  if (f.mmproj.empty() && !own_tower) {
    if (!required) return nullptr;
    if (!c.mrope() && c.family != Family::Gemma3 && c.family != Family::Gemma4)
      fail(ErrorKind::Usage,
           model_path + ": family " + family_name(c.family) + " takes no images (--image)");
    fail(ErrorKind::Usage, model_path + ": a GGUF text model needs --mmproj FILE for images");
  }
  const std::string tower = f.mmproj.empty() ? model_path : f.mmproj;
  std::shared_ptr<VisionTower> vision = open_vision_tower(tower, threads);
  if (!vision->feeds(c))
    fail(ErrorKind::Usage, tower + ": its vision tower is " + vision->name() + ", not one family " +
                               family_name(c.family) + " takes");
  // Gemma 3's images (rows attending to their image's later rows) passed on a GPU; Gemma 4's
  // (two-way on its sliding layers, per-layer inputs at image rows) have not run there yet.
  if (c.family == Family::Gemma4 && !engine.backend().is_host() && !unverified_gpu_ops_allowed())
    fail(ErrorKind::Unsupported, tower + ": " + vision->name() +
                                     " images are not yet verified on a GPU (--backend cpu runs "
                                     "them)");
  if (vision->out_hidden() != c.n_embd)
    fail(ErrorKind::Model, tower + ": the vision tower's projection width " +
                               std::to_string(vision->out_hidden()) +
                               " does not match the text model's " + std::to_string(c.n_embd));
  if (vision->n_deepstack() != c.n_deepstack)
    fail(ErrorKind::Model,
         tower + ": the vision tower gives " + std::to_string(vision->n_deepstack()) +
             " DeepStack features, the text model takes " + std::to_string(c.n_deepstack));
  if (f.min_pixels > 0 || f.max_pixels > 0) vision->set_pixel_bounds(f.min_pixels, f.max_pixels);
  if (f.max_tokens != 0) vision->set_max_tokens(f.max_tokens);
  return vision;
}

CommandImages encode_images(const ImageFlags& f, Engine& engine, const std::string& model_path,
                            int threads) {
  if (f.images.empty()) {
    if (!f.mmproj.empty()) fail(ErrorKind::Usage, "--mmproj without --image");
    return {};
  }
  const std::shared_ptr<VisionTower> vision = open_vision(f, engine, model_path, threads, true);
  CommandImages out;
  out.layout = image_layout(*vision, engine.cfg());
  out.margin = vision->block_margin();
  for (const std::string& path : f.images) {
    const std::vector<uint8_t> bytes = read_image_file(path);
    try {
      out.encoded.push_back(vision->encode_file(bytes.data(), bytes.size()));
    } catch (const Error& e) {
      fail(e.kind(), path + ": " + e.what());
    }
  }
  return out;
}

ImageTokens image_tokens(const ImageFlags& f, const std::string& model_path, const Tokenizer* tok,
                         const std::string& margin) {
  ImageTokens t;
  const nlohmann::json cfg = hf_config(model_path);
  // Qwen3-VL's key or piece, else Gemma 3's, else Gemma 4's.
  const auto from_config = [&](std::initializer_list<const char*> keys) -> int32_t {
    for (const char* k : keys)
      if (cfg.is_object() && cfg.contains(k) && cfg[k].is_number_integer())
        return cfg[k].get<int32_t>();
    return -1;
  };
  const auto from_vocab = [&](std::initializer_list<const char*> pieces) -> int32_t {
    if (tok == nullptr) return -1;
    for (const char* piece : pieces)
      if (auto id = tok->find_token(piece)) return *id;
    return -1;
  };
  t.image = f.image_token >= 0 ? static_cast<int32_t>(f.image_token)
                               : from_config({"image_token_id", "image_token_index"});
  if (t.image < 0) t.image = from_vocab({"<|image_pad|>", "<image_soft_token>", "<|image|>"});
  t.start = from_config({"vision_start_token_id", "boi_token_index", "boi_token_id"});
  if (t.start < 0) t.start = from_vocab({"<|vision_start|>", "<start_of_image>", "<|image>"});
  t.end = from_config({"vision_end_token_id", "eoi_token_index", "eoi_token_id"});
  if (t.end < 0) t.end = from_vocab({"<|vision_end|>", "<end_of_image>", "<image|>"});
  if (tok != nullptr && !margin.empty()) t.margin = tok->encode(margin, false, false);
  if (t.image < 0)
    fail(ErrorKind::Usage, model_path + ": no image placeholder token found (give --image-token)");
  return t;
}

std::vector<int32_t> with_image_blocks(const std::vector<int32_t>& prompt, bool has_bos,
                                       const std::vector<EncodedImage>& images,
                                       const ImageTokens& t) {
  if (images.empty()) return prompt;
  if (t.start < 0 || t.end < 0)
    fail(ErrorKind::Usage, "the model's vision start / end tokens were not found");
  std::vector<int32_t> out;
  const size_t head = has_bos && !prompt.empty() ? 1 : 0;
  out.insert(out.end(), prompt.begin(), prompt.begin() + static_cast<long>(head));
  for (const EncodedImage& im : images) {
    out.insert(out.end(), t.margin.begin(), t.margin.end());
    out.push_back(t.start);
    out.insert(out.end(), static_cast<size_t>(im.tokens()), t.image);
    out.push_back(t.end);
    out.insert(out.end(), t.margin.begin(), t.margin.end());
  }
  out.insert(out.end(), prompt.begin() + static_cast<long>(head), prompt.end());
  return out;
}

}  // namespace ts::cli
