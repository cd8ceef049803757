// Every fixture opens in every form, and `inspect --json` describes the same model whichever
// form it came from: the architecture fields agree between the HF directory and the GGUF files,
// except the few that state how the file stores things (source, rope pairing, baked norms).
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "fixture_models.h"
#include "test_paths.h"

namespace ts {
namespace {

nlohmann::json inspect(const std::string& path) {
  std::string out;
  EXPECT_EQ(
      test::run_command(test::binary_path() + " inspect --json " + path + " 2>/dev/null", &out), 0)
      << path;
  return nlohmann::json::parse(out);
}

TEST(InspectForms, EveryFixtureOpensAndFormsAgree) {
  const std::vector<std::string> names = {
      "llama",   "llama_rope_llama3", "mistral",    "qwen2",      "qwen3",
      "gemma3",  "mixtral",           "qwen3_moe",  "minimax_m2", "qwen3_next",
      "qwen3_5", "qwen3_5_moe",       "deepseek_v3"};
  std::map<std::string, std::vector<nlohmann::json>> by_fixture;
  for (const auto& f : test::fixture_forms(names)) {
    nlohmann::json j = inspect(f.path)["arch"];
    // How the file stores things, not what the model is:
    for (const char* k : {"source", "rope_pairing", "norm_plus_one"}) j.erase(k);
    if (j.contains("deltanet")) j["deltanet"].erase("v_heads_tiled");  // the converter reorders
    // GGUF states llama3 scaling as per-frequency divisors; HF as the formula's parameters.
    for (const char* k : {"rope_factor", "rope_low_freq_factor", "rope_high_freq_factor",
                          "rope_orig_ctx", "rope_freqs_tensor"})
      j.erase(k);
    by_fixture[f.fixture].push_back(j);
  }
  for (const auto& [name, forms] : by_fixture)
    for (size_t i = 1; i < forms.size(); ++i)
      EXPECT_EQ(forms[0], forms[i]) << name << ": form 0 vs form " << i;
  if (test::shared_dir().empty())
    GTEST_SKIP() << "shared fixtures absent: only the GGUF copies were compared";
}

// A hybrid model: its layer pattern and what a sequence holds, in text and JSON.
TEST(InspectForms, HybridShowsItsLayersAndState) {
  const std::string path = test::fixtures_dir() + "/models/qwen3_5/model-f32.gguf";
  std::string out;
  ASSERT_EQ(test::run_command(test::binary_path() + " inspect " + path, &out), 0) << out;
  EXPECT_NE(out.find("layers     DDDA"), std::string::npos) << out;
  EXPECT_NE(out.find("recurrent state"), std::string::npos) << out;
  std::string json;
  ASSERT_EQ(test::run_command(test::binary_path() + " inspect --json " + path, &json), 0) << json;
  const auto j = nlohmann::json::parse(json);
  EXPECT_EQ(j["arch"]["layer_mixer"],
            nlohmann::json({"deltanet", "deltanet", "deltanet", "attention"}));
  EXPECT_EQ(j["arch"]["deltanet"]["n_v_heads"], 4);
  // Three DeltaNet layers, each a window of 3 x 128 channels and a state of 4 x 16 x 16, in f32.
  EXPECT_EQ(j["per_sequence"]["recurrent_state_bytes"], 3 * (3 * 128 + 4 * 16 * 16) * 4);
  EXPECT_EQ(j["footprint"]["recurrent_state_bytes"], 3 * 3 * (3 * 128 + 4 * 16 * 16) * 4);
}

// An encoder: its configuration the same from each form, and the footprint of serving it with
// --parallel 1 (its weights and a pass of one text of its positions) as serve announces it.
TEST(InspectForms, EncodersShowTheirStackAndFootprint) {
  for (const char* fixture : {"bert_embedding", "nomic_bert"}) {
    const std::string dir = test::fixtures_dir() + "/models/" + fixture;
    const nlohmann::json gguf = inspect(dir + "/model-f32.gguf"), hf = inspect(dir + "/hf");
    EXPECT_EQ(gguf["stack"], "encoder");
    EXPECT_EQ(gguf["arch"], hf["arch"]) << fixture;
    EXPECT_EQ(gguf["footprint"], hf["footprint"]) << fixture;
    const nlohmann::json& fp = gguf["footprint"];
    EXPECT_EQ(fp["pass_rows"], gguf["arch"]["n_positions"]);
    EXPECT_EQ(fp["total_bytes"].get<uint64_t>(),
              fp["weight_bytes"].get<uint64_t>() + fp["pass_bytes"].get<uint64_t>());
  }
  const nlohmann::json nomic = inspect(test::fixtures_dir() + "/models/nomic_bert/model-f32.gguf");
  EXPECT_EQ(nomic["arch"]["positions"], "rotary");
  EXPECT_EQ(nomic["arch"]["ffn"], "swiglu");
  EXPECT_EQ(nomic["arch"]["rope_theta"], 1000.0);
  std::string out;
  ASSERT_EQ(
      test::run_command(
          test::binary_path() + " inspect " + test::fixtures_dir() + "/models/nomic_bert/hf", &out),
      0)
      << out;
  EXPECT_NE(out.find("nomic-bert (HF), an encoder: embeddings only"), std::string::npos) << out;
  EXPECT_NE(out.find("footprint  server: encoder weights"), std::string::npos) << out;
}

}  // namespace
}  // namespace ts
