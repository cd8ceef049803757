// gpt-oss files that do not add up are refused at open with one error naming the field or
// tensor: a sink tensor of the wrong length, a sliding-window pattern that does not match the
// layer count, a NaN e8m0 scale, missing MXFP4 planes (MXFP4 rows that are not whole blocks: the
// GGUF reader, test_gguf_malformed.cpp). And a
// device backend takes it. The fixtures rewritten with one bad value each.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "fixture_models.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "model/model_spec.h"
#include "not_host_backend.h"
#include "runtime/engine.h"
#include "test_paths.h"

namespace ts {
namespace {

namespace fs = std::filesystem;

// A tensor as it will be written: name, type, dims, bytes.
struct Tensor {
  std::string name;
  DType dtype;
  std::vector<uint64_t> dims;
  std::vector<uint8_t> bytes;
};

using EditKv = std::function<bool(const std::string& key, GgufWriter& w)>;
using EditTensor = std::function<void(Tensor& t)>;

// The GGUF `file` of fixture `name` rewritten: each metadata entry through `kv` (true: it wrote
// or dropped the entry itself), each tensor through `tensor`.
std::string rewritten(const std::string& name, const std::string& file, const EditKv& kv,
                      const EditTensor& tensor) {
  const auto in = GgufFile::open(test::fixture_file(name, file));
  GgufWriter w;
  for (const auto& [key, value] : in->metadata())
    if (!kv(key, w)) w.add_kv(key, value);
  for (const GgufTensor& t : in->tensors()) {
    const auto* data = static_cast<const uint8_t*>(in->tensor_data(t));
    Tensor x{t.name, t.dtype, t.dims, std::vector<uint8_t>(data, data + t.nbytes)};
    tensor(x);
    w.add_tensor(x.name, x.dtype, x.dims, x.bytes.data(), x.bytes.size());
  }
  const std::string path = test::scratch_path(name + "-edited.gguf");
  w.write(path);
  return path;
}

const EditKv kSameKv = [](const std::string&, GgufWriter&) { return false; };
const EditTensor kSameTensors = [](Tensor&) {};

// The HF directory of shared fixture `name` copied with its config.json passed through `edit`.
std::string hf_copy(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
  const std::string src = test::shared_path("fixtures/" + name + "/hf");
  const std::string dst = test::scratch_path(name + "-hf-edited");
  fs::remove_all(dst);
  fs::copy(src, dst);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dst + "/config.json"));
  edit(config);
  std::ofstream(dst + "/config.json") << config.dump();
  return dst;
}

// Opening `path` (the spec, or the engine on the CPU when `engine`) fails with an error of `kind`
// whose message contains `what`.
void expect_refused(const std::string& path, const std::string& what, bool engine = false,
                    ErrorKind kind = ErrorKind::Model) {
  try {
    if (engine) {
      EngineOptions o;
      o.backend = "cpu";
      o.threads = 1;
      o.ctx = 32;
      Engine::open(path, o);
    } else {
      open_model_spec(path);
    }
    ADD_FAILURE() << "opened; expected an error about " << what;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

// The fixtures live in the shared data only: without it the tests skip.
class GptOssConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string f32 = test::fixture_file("gpt_oss", "model-f32.gguf");
    const std::string mxfp4 = test::fixture_file("gpt_oss_mxfp4", "model-mxfp4.gguf");
    TS_REQUIRE_SHARED(f32);
    TS_REQUIRE_SHARED(mxfp4);
  }
};

TEST_F(GptOssConfig, FixturesOpen) {
  EXPECT_NO_THROW(open_model_spec(rewritten("gpt_oss", "model-f32.gguf", kSameKv, kSameTensors)));
  const auto spec =
      open_model_spec(rewritten("gpt_oss_mxfp4", "model-mxfp4.gguf", kSameKv, kSameTensors));
  EXPECT_EQ(spec->layers[0].experts[3][kExpDown].dtype, DType::MXFP4);
  EXPECT_EQ(spec->cfg.layer_sliding, (std::vector<uint8_t>{1, 0}));
  EXPECT_FALSE(spec->cfg.rope_yarn_truncate);
}

TEST_F(GptOssConfig, SinkTensorOfTheWrongLength) {
  const auto short_sinks = [](Tensor& t) {
    if (t.name != "blk.1.attn_sinks.weight") return;
    t.dims = {3};
    t.bytes.resize(12);
  };
  expect_refused(rewritten("gpt_oss", "model-f32.gguf", kSameKv, short_sinks),
                 "tensor 'blk.1.attn_sinks.weight' has shape [3], expected [4]");
}

TEST_F(GptOssConfig, SlidingPatternNotMatchingTheLayers) {
  const EditKv three = [](const std::string& key, GgufWriter& w) {
    if (key != "gpt-oss.attention.sliding_window") return false;
    w.add_kv(key, gguf_int(GgufType::U32, 8));
    GgufArray a;
    a.elem = GgufType::Bool;
    a.ints = {1, 0, 1};
    w.add_kv("gpt-oss.attention.sliding_window_pattern", gguf_array(std::move(a)));
    return true;
  };
  expect_refused(rewritten("gpt_oss", "model-f32.gguf", three, kSameTensors),
                 "sliding_window_pattern");
  const std::string shared = test::shared_path("fixtures/gpt_oss/hf");
  if (shared.empty()) GTEST_SKIP() << "no shared fixtures";
  expect_refused(
      hf_copy("gpt_oss",
              [](nlohmann::json& c) {
                c["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention"};
              }),
      "layer_types");
}

TEST_F(GptOssConfig, NanScaleOfAnExpert) {
  const auto nan_scale = [](Tensor& t) {
    if (t.name == "blk.1.ffn_up_exps.weight") t.bytes[17 * 5] = 0xFF;  // block 5 of expert 0
  };
  expect_refused(rewritten("gpt_oss_mxfp4", "model-mxfp4.gguf", kSameKv, nan_scale),
                 "e8m0 scale 0xFF", true);
}

TEST_F(GptOssConfig, MissingMxfp4Planes) {
  const std::string shared = test::shared_path("fixtures/gpt_oss_mxfp4/hf");
  if (shared.empty()) GTEST_SKIP() << "no shared fixtures";
  // One scales tensor renamed in the safetensors header (same length: the header keeps its size).
  const std::string dir = hf_copy("gpt_oss_mxfp4", [](nlohmann::json&) {});
  const std::string file = dir + "/model.safetensors";
  std::ifstream in(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  in.close();
  const std::string from = "layers.1.mlp.experts.down_proj_scales";
  bytes.replace(bytes.find(from), from.size(), "layers.1.mlp.experts.down_proj_scalez");
  std::ofstream(file, std::ios::binary) << bytes;
  expect_refused(dir, "missing tensor 'model.layers.1.mlp.experts.down_proj_scales'");
}

// Its device kernels (sinks, clamped SwiGLU, MXFP4) passed their tests on a GPU: a device backend
// is not refused at open, which goes on to use it.
TEST_F(GptOssConfig, DeviceBackendsTakeIt) {
  for (const auto& fixture :
       {std::pair{"gpt_oss", "model-f32.gguf"}, std::pair{"gpt_oss_mxfp4", "model-mxfp4.gguf"}}) {
    const std::string path = test::fixture_file(fixture.first, fixture.second);
    TS_REQUIRE_SHARED(path);
    try {
      Engine::open(path, EngineOptions{}, std::make_unique<test::NotHost>());
      ADD_FAILURE() << fixture.first << " opened on a backend that fails every op";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("test: the backend was used"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace ts
