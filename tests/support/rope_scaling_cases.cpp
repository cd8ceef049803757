#include "rope_scaling_cases.h"

#include <gtest/gtest.h>

#include "formats/gguf_writer.h"
#include "test_paths.h"

namespace ts::test {

std::string gguf_with_keys(const std::string& from, const GgufKeys& keys, const std::string& name) {
  const auto src = GgufFile::open(from);
  GgufWriter w;
  for (const auto& [key, value] : src->metadata())
    if (key != "general.alignment") w.add_kv(key, value);
  w.set_alignment(static_cast<uint32_t>(src->alignment()));
  for (const auto& [key, value] : keys) w.add_kv(key, value);
  for (const GgufTensor& t : src->tensors())
    w.add_tensor(t.name, t.dtype, t.dims, src->tensor_data(t), t.nbytes);
  std::string path = test::scratch_path(name + ".gguf");
  w.write(path);
  return path;
}

std::string fixture_gguf(const std::string& family) {
  return fixtures_dir() + "/models/" + family + "/model-f32.gguf";
}

RopeScalingCase gemma3_linear8() {
  RopeScalingCase c;
  c.name = "gemma3 linear 8";
  c.plain_gguf = fixture_gguf("gemma3");
  c.gguf = gguf_with_keys(c.plain_gguf,
                          {{"gemma3.rope.scaling.type", gguf_string("linear")},
                           {"gemma3.rope.scaling.factor", gguf_float(GgufType::F32, 8)}},
                          "gemma3-linear");
  c.ids = fixture_prompt(fixture_forms({"gemma3"}).front());
  c.ref = read_f32_file(fixtures_dir() + "/models/gemma3/ref_logits_linear8.f32");
  return c;
}

RopeScalingCase qwen3_yarn4() {
  RopeScalingCase c;
  c.name = "qwen3 yarn 4";
  c.plain_gguf = fixture_gguf("qwen3");
  c.gguf =
      gguf_with_keys(c.plain_gguf,
                     {{"qwen3.rope.scaling.type", gguf_string("yarn")},
                      {"qwen3.rope.scaling.factor", gguf_float(GgufType::F32, 4)},
                      {"qwen3.rope.scaling.original_context_length", gguf_int(GgufType::U32, 16)}},
                     "qwen3-yarn");
  const std::vector<int32_t> prompt = fixture_prompt(fixture_forms({"qwen3"}).front());
  while (c.ids.size() < 40) c.ids.insert(c.ids.end(), prompt.begin(), prompt.end());
  c.ids.resize(40);
  c.ref = read_f32_file(fixtures_dir() + "/models/qwen3/ref_logits_yarn.f32");
  c.run.ctx = 128;
  return c;
}

}  // namespace ts::test
