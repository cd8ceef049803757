// Qwen3-VL-MoE (qwen3vlmoe): the HF directory and llama.cpp's GGUF of the qwen3_vl_moe fixture read
// as the same decoder (Qwen3-VL's M-RoPE and DeepStack, Qwen3-MoE's experts, the router always
// renormalising); the fused expert tensors in either HF layout (the released checkpoints'
// transposed one, transformers' own) give the same bits; a device backend refuses the family
// until it has run on a GPU, unless TURBOSPARK_UNVERIFIED_GPU_OPS=1 asks for it. Its logits are
// checked in test_fixture_logits, test_qwen3vl and test_qwen3vl_cli.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "fixture_models.h"
#include "model/model_spec.h"
#include "not_host_backend.h"
#include "runtime/engine.h"
#include "test_paths.h"

namespace ts {
namespace {

constexpr const char* kFixture = "qwen3_vl_moe";

std::string fixture_dir() {
  const std::string meta = test::fixture_file(kFixture, "meta.json");
  return meta.substr(0, meta.rfind('/'));
}

TEST(Qwen3VlMoeConfig, HfAndGgufReadAsTheSameDecoder) {
  const auto hf = open_model_spec(fixture_dir() + "/hf");
  const auto gguf = open_model_spec(fixture_dir() + "/model-f32.gguf");
  for (const ModelSpec* s : {hf.get(), gguf.get()}) {
    const ArchConfig& c = s->cfg;
    const std::string form = s->source->path();
    EXPECT_EQ(c.family, Family::Qwen3VLMoe) << form;
    EXPECT_EQ(c.qk_norm, QkNorm::PerHead) << form;
    EXPECT_EQ(c.mrope_sections, (std::vector<int64_t>{3, 3, 2})) << form;
    EXPECT_TRUE(c.mrope_interleaved) << form;
    EXPECT_EQ(c.n_deepstack, 2) << form;
    EXPECT_EQ(c.n_expert, 8) << form;
    EXPECT_EQ(c.n_expert_used, 2) << form;
    EXPECT_EQ(c.n_ff_expert, 8) << form;
    EXPECT_EQ(c.router, RouterScoring::SoftmaxTopk) << form;
    EXPECT_TRUE(c.norm_topk_prob) << form;
    EXPECT_TRUE(c.tied_embeddings) << form;
    EXPECT_EQ(c.layer_moe, (std::vector<uint8_t>{1, 1})) << form;
  }
  // Each expert's projections hold the same values in both: the HF ones by columns (bf16), the
  // GGUF's by rows (f32).
  EXPECT_EQ(hf->layers[0].experts[3][kExpUp].layout, SliceLayout::Columns);
  EXPECT_EQ(hf->layers[0].experts[3][kExpUp].first, 8);
  EXPECT_EQ(gguf->layers[0].experts[3][kExpUp].layout, SliceLayout::Rows);
}

// The HF directory with its experts as transformers saves them ([E][2 ff][hidden] and
// [E][hidden][ff]): each tensor transposed in place, the header's shapes swapped.
void write_transformers_layout(const std::string& from, const std::string& to) {
  std::filesystem::create_directories(to);
  for (const auto& e : std::filesystem::directory_iterator(from))
    if (e.path().filename() != "model.safetensors")
      std::filesystem::copy_file(e.path(), to + "/" + e.path().filename().string(),
                                 std::filesystem::copy_options::overwrite_existing);
  std::ifstream in(from + "/model.safetensors", std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  auto header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + header_len);
  std::vector<char> data(bytes.begin() + 8 + static_cast<int64_t>(header_len), bytes.end());
  int transposed = 0;
  for (auto& [name, t] : header.items()) {
    if (!name.ends_with("experts.gate_up_proj") && !name.ends_with("experts.down_proj")) continue;
    ASSERT_EQ(t["dtype"], "BF16") << name;
    auto shape = t["shape"].get<std::vector<size_t>>();
    const size_t E = shape[0], R = shape[1], C = shape[2];
    const size_t begin = t["data_offsets"][0].get<size_t>();
    std::vector<char> slab(data.begin() + static_cast<int64_t>(begin),
                           data.begin() + static_cast<int64_t>(begin + E * R * C * 2));
    for (size_t e = 0; e < E; ++e)
      for (size_t r = 0; r < R; ++r)
        for (size_t c = 0; c < C; ++c)
          std::memcpy(&data[begin + ((e * C + c) * R + r) * 2], &slab[((e * R + r) * C + c) * 2],
                      2);
    t["shape"] = std::vector<size_t>{E, C, R};
    ++transposed;
  }
  ASSERT_EQ(transposed, 4);  // two a layer
  const std::string h = header.dump();
  const uint64_t n = h.size();
  std::ofstream out(to + "/model.safetensors", std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << h;
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

TEST(Qwen3VlMoeConfig, TransformersLayoutGivesTheSameBits) {
  const std::string dir = test::scratch_path("qwen3_vl_moe_transformers_layout");
  write_transformers_layout(fixture_dir() + "/hf", dir);
  const auto spec = open_model_spec(dir);
  EXPECT_EQ(spec->layers[1].experts[5][kExpDown].layout, SliceLayout::Rows);
  const std::vector<int32_t> ids = test::fixture_prompt(test::fixture_forms({kFixture}).at(0));
  for (const bool decode : {false, true})
    for (const int64_t slots : {0, 2}) {
      const test::LogitsRun run{.batch = 4, .decode = decode, .slots = slots};
      const std::vector<float> released = test::run_logits(fixture_dir() + "/hf", ids, run);
      const std::vector<float> saved = test::run_logits(dir, ids, run);
      ASSERT_EQ(released.size(), saved.size());
      EXPECT_EQ(0, std::memcmp(released.data(), saved.data(), saved.size() * sizeof(float)))
          << (decode ? "decode" : "prefill") << ", " << slots << " slots";
    }
  std::filesystem::remove_all(dir);
}

TEST(Qwen3VlMoeConfig, DeviceBackendsRefuseItUntilVerifiedOnAGpu) {
  const std::string path = fixture_dir() + "/model-f32.gguf";
  ASSERT_EQ(0, unsetenv("TURBOSPARK_UNVERIFIED_GPU_OPS"));
  try {
    Engine::open(path, EngineOptions{}, std::make_unique<test::NotHost>());
    ADD_FAILURE() << "qwen3vlmoe opened on a device backend";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("family qwen3vlmoe is not yet verified on a GPU"),
              std::string::npos)
        << e.what();
  }
  // Asked for, it goes on to use the backend.
  ASSERT_EQ(0, setenv("TURBOSPARK_UNVERIFIED_GPU_OPS", "1", 1));
  try {
    Engine::open(path, EngineOptions{}, std::make_unique<test::NotHost>());
    ADD_FAILURE() << "opened on a backend that fails every op";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test: the backend was used"), std::string::npos)
        << e.what();
  }
  ASSERT_EQ(0, unsetenv("TURBOSPARK_UNVERIFIED_GPU_OPS"));
}

}  // namespace
}  // namespace ts
