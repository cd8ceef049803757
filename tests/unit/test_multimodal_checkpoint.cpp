// The text decoder of a multimodal checkpoint (Gemma3ForConditionalGeneration,
// Gemma4ForConditionalGeneration, Qwen3_5ForConditionalGeneration and its MoE sibling, made here
// from the text fixtures: config.json with text_config and a vision config, the text tensors under
// the multimodal prefix, a vision tensor beside them) gives the text model's logits bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fixture_models.h"
#include "model/family.h"
#include "model/model_source.h"
#include "test_paths.h"

namespace ts {
namespace {

struct Case {
  std::string fixture;
  std::string arch;
  std::string model_type;
  Family family;
};

const Case kCases[] = {
    {"gemma3", "Gemma3ForConditionalGeneration", "gemma3", Family::Gemma3},
    {"gemma4", "Gemma4ForConditionalGeneration", "gemma4", Family::Gemma4},
    {"qwen3_5", "Qwen3_5ForConditionalGeneration", "qwen3_5", Family::Qwen35},
    {"qwen3_5_moe", "Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe", Family::Qwen35Moe},
};

// A multimodal checkpoint of the fixture's text model: config.json with text_config and a vision
// config, the text tensors under `prefix`, a vision tensor beside them.
std::string multimodal_copy(const Case& c, const std::string& prefix) {
  const std::string& fixture = c.fixture;
  const std::string src = test::fixture_file(fixture, "hf");
  const std::string dir = test::scratch_path(fixture + "-multimodal");
  EXPECT_EQ(test::run_command("rm -rf '" + dir + "' && mkdir -p '" + dir + "'"), 0);
  nlohmann::json text = nlohmann::json::parse(std::ifstream(src + "/config.json"));
  text.erase("architectures");
  const nlohmann::json config = {
      {"architectures", {c.arch}},
      {"model_type", c.model_type},
      {"text_config", text},
      {"vision_config",
       {{"hidden_size", 32}, {"num_hidden_layers", 1}, {"patch_size", 4}, {"image_size", 16}}},
      {"image_token_index", 4},
      {"tie_word_embeddings", text.value("tie_word_embeddings", false)}};
  std::ofstream(dir + "/config.json") << config.dump(1);
  std::ifstream in(src + "/model.safetensors", std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json h = nlohmann::json::parse(header), out;
  for (auto& [name, t] : h.items()) {
    if (name == "__metadata__") continue;
    out[name.rfind("model.", 0) == 0 ? prefix + name.substr(6) : name] = t;
  }
  const std::vector<float> patch(16, 0.5f);
  out["model.vision_tower.patch_embedding.weight"] = {
      {"dtype", "F32"}, {"shape", {4, 4}}, {"data_offsets", {data.size(), data.size() + 64}}};
  std::string head = out.dump();
  head.append((8 - head.size() % 8) % 8, ' ');
  std::ofstream o(dir + "/model.safetensors", std::ios::binary);
  const uint64_t len = head.size();
  o.write(reinterpret_cast<const char*>(&len), 8);
  o << head << data;
  o.write(reinterpret_cast<const char*>(patch.data()), 64);
  o.close();
  for (const char* f : {"tokenizer.model", "tokenizer_config.json"})
    test::run_command("cp '" + src + "/" + f + "' '" + dir + "/'");
  return dir;
}

TEST(MultimodalCheckpoint, TextDecoderGivesTheTextModelsLogits) {
  for (const Case& c : kCases) {
    const std::string text_dir = test::fixture_file(c.fixture, "hf");
    TS_REQUIRE_SHARED(text_dir);
    const auto forms = test::fixture_forms({c.fixture});
    const std::vector<int32_t> ids = test::fixture_prompt(forms.front());
    const std::vector<float> want = test::run_logits(text_dir, ids, {});
    // transformers 5 saves the text decoder under model.language_model, earlier versions (the
    // official Gemma 3 checkpoints) under language_model.model.
    for (const std::string prefix : {"model.language_model.", "language_model.model."}) {
      SCOPED_TRACE(c.arch + " " + prefix);
      const std::string dir = multimodal_copy(c, prefix);
      EXPECT_EQ(read_arch_config(*ModelSource::open(dir)).family, c.family);
      const std::vector<float> got = test::run_logits(dir, ids, {});
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
    }
  }
}

// A real Gemma3ForConditionalGeneration directory as transformers saves it (text decoder under
// language_model.model, a SigLIP tower under vision_tower.vision_model, the projector): its text
// logits are transformers', which the fixture's script checked equal the text-only class's.
TEST(MultimodalCheckpoint, Gemma3ConditionalGenerationDirectory) {
  const std::string dir = test::fixture_file("gemma3_vision", "hf");
  ASSERT_FALSE(dir.empty());
  EXPECT_EQ(read_arch_config(*ModelSource::open(dir)).family, Family::Gemma3);
  const nlohmann::json meta =
      nlohmann::json::parse(std::ifstream(test::fixture_file("gemma3_vision", "meta.json")));
  const auto ids = meta["prompt_ids"].get<std::vector<int32_t>>();
  const auto want = test::read_f32_file(test::fixture_file("gemma3_vision", "ref_logits.f32"));
  for (const bool decode : {false, true}) {
    test::LogitsRun r;
    r.decode = decode;
    const auto c = test::compare_logits(test::run_logits(dir, ids, r), want, 96);
    std::cout << (decode ? "decode " : "prefill ") << c.summary() << "\n";
    EXPECT_LE(c.rel, 1e-4) << c.summary();
    EXPECT_EQ(c.argmax_mismatches, 0) << c.summary();
  }
}

}  // namespace
}  // namespace ts
