// `turbospark logits --image` reproduces each Qwen3-VL fixture's image reference (qwen3_vl, dense,
// in the shared data; qwen3_vl_moe in the repository) from the HF directory and from GGUF + mmproj
// (the ids with the placeholder tokens, as in meta.json); bad image input is a one-line named
// error with exit code 1 (2 for a model that cannot take it: an mmproj whose projection is not the
// text model's width), never a crash.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "fixture_models.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "test_paths.h"

namespace ts {
namespace {

class Qwen3VlCli : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    TS_REQUIRE_SHARED(test::fixture_file(GetParam(), "mmproj-f32.gguf"));
    dir_ = test::fixture_file(GetParam(), "meta.json");
    dir_ = dir_.substr(0, dir_.rfind('/'));
    std::ifstream in(dir_ + "/meta.json");
    const auto meta = nlohmann::json::parse(in);
    const auto ids = meta["image"]["prompt_ids"].get<std::vector<int32_t>>();
    n_ids_ = static_cast<int64_t>(ids.size());
    ids_ = test::ids_csv(ids);
    image_token_ = std::to_string(meta["config"]["image_token_id"].get<int32_t>());
  }
  int run(const std::string& args, std::string* out) {
    return test::run_command(test::binary_path() + " " + args + " 2>&1", out);
  }
  std::string dir_, ids_, image_token_;
  int64_t n_ids_ = 0;
};

TEST_P(Qwen3VlCli, LogitsWithAnImageMatchReference) {
  const std::vector<float> ref = test::read_f32_file(dir_ + "/ref_logits_image.f32");
  const auto vocab = static_cast<int64_t>(ref.size()) / n_ids_;
  // An mmproj GGUF has no processor bounds: the images are small enough not to be resized.
  const std::string gguf = dir_ + "/model-f32.gguf --mmproj " + dir_ +
                           "/mmproj-f32.gguf --image-token " + image_token_ +
                           " --image-min-pixels 64";
  for (const std::string& model : {dir_ + "/hf", gguf}) {
    for (const char* mode : {"prefill", "decode"}) {
      const std::string out_file = test::scratch_path(std::string("logits_") + mode + ".f32");
      std::string out;
      ASSERT_EQ(run("logits -m " + model + " --image " + dir_ + "/image.png --tokens " + ids_ +
                        " --out " + out_file + " --kv-type f32 -t 2 --mode " + mode,
                    &out),
                0)
          << out;
      const auto c = test::compare_logits(test::read_f32_file(out_file), ref, vocab);
      EXPECT_LE(c.rel, 1e-4) << model << " " << mode << ": " << c.summary();
      EXPECT_EQ(c.argmax_mismatches, 0) << model << " " << mode << ": " << c.summary();
    }
  }
}

// chat: --image goes with the first message, /image FILE with the next; a file that cannot be
// read is reported and the chat goes on. Greedy answers with an image equal `run`'s when the
// prompt is the same: here the raw format, whose prompt is the message itself.
TEST_P(Qwen3VlCli, ChatTakesImages) {
  const std::string model = "-m " + dir_ + "/hf --kv-type f32 -t 2 --temp 0 -n 4 ";
  std::string chat, run_out;
  const std::string input = test::scratch_path("chat_input.txt");
  std::ofstream(input) << "The quick brown\n/image /nonexistent.png\n";
  ASSERT_EQ(
      run("chat " + model + "--chat-template raw --image " + dir_ + "/image.png < " + input, &chat),
      0)
      << chat;
  EXPECT_NE(chat.find("cannot read image '/nonexistent.png'"), std::string::npos) << chat;
  ASSERT_EQ(test::run_command(test::binary_path() + " run " + model + "--image " + dir_ +
                                  "/image.png -p 'The quick brown' --no-display-prompt 2>/dev/null",
                              &run_out),
            0)
      << run_out;
  while (!run_out.empty() && run_out.back() == '\n') run_out.pop_back();
  ASSERT_FALSE(run_out.empty());
  EXPECT_NE(chat.find("> " + run_out), std::string::npos) << chat << "\nrun: " << run_out;
}

TEST_P(Qwen3VlCli, BadImagesAreNamedErrors) {
  const std::string bad = test::scratch_path("bad.png");
  {
    std::ifstream in(dir_ + "/image.png", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(bad, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  const std::string empty = test::scratch_path("empty.jpg");
  std::ofstream(empty).close();
  const std::string base = "logits -m " + dir_ + "/hf --tokens " + ids_ + " --out " +
                           test::scratch_path("x.f32") + " -t 1 --image ";
  std::string out;
  EXPECT_EQ(run(base + bad, &out), 1) << out;
  EXPECT_NE(out.find("bad.png: image: bad PNG data"), std::string::npos) << out;
  EXPECT_EQ(run(base + empty, &out), 1) << out;
  EXPECT_NE(out.find("empty file"), std::string::npos) << out;
  EXPECT_EQ(run(base + dir_ + "/meta.json", &out), 1) << out;
  EXPECT_NE(out.find("unsupported format"), std::string::npos) << out;
  // Two images for one placeholder run.
  EXPECT_EQ(run(base + dir_ + "/image.png --image " + dir_ + "/image.png", &out), 1) << out;
  EXPECT_NE(out.find("2 image(s) given"), std::string::npos) << out;
  // A GGUF text model without --mmproj; a text-only family.
  EXPECT_EQ(run("logits -m " + dir_ + "/model-f32.gguf --tokens 1,2 --out " +
                    test::scratch_path("y.f32") + " --image " + dir_ + "/image.png",
                &out),
            1)
      << out;
  EXPECT_NE(out.find("needs --mmproj"), std::string::npos) << out;
  const std::string qwen3 = test::fixture_file("qwen3", "model-f32.gguf");
  if (!qwen3.empty()) {
    EXPECT_EQ(run("logits -m " + qwen3 + " --tokens 1,2 --out " + test::scratch_path("z.f32") +
                      " --image " + dir_ + "/image.png",
                  &out),
              1)
        << out;
    EXPECT_NE(out.find("takes no images"), std::string::npos) << out;
  }
}

// The fixture's mmproj with its projection (the final merger's and the DeepStack mergers' last
// layer) cut to `width` outputs: a tower for another text model.
void write_narrowed_mmproj(const std::string& from, const std::string& to, uint64_t width) {
  const auto src = GgufFile::open(from);
  GgufWriter w;
  for (const auto& [key, value] : src->metadata())
    w.add_kv(key, key == "clip.vision.projection_dim"
                      ? gguf_int(value.type, static_cast<int64_t>(width))
                      : value);
  for (const GgufTensor& t : src->tensors()) {
    std::vector<uint64_t> dims = t.dims;
    if (t.name.starts_with("mm.2.") ||
        (t.name.starts_with("v.deepstack.") && t.name.find(".fc2.") != std::string::npos))
      dims.back() = width;  // the outputs: a weight's rows, a bias's length
    const uint64_t bytes = t.nbytes / t.dims.back() * dims.back();
    w.add_tensor(t.name, t.dtype, dims, src->tensor_data(t), bytes);
  }
  w.write(to);
}

TEST_P(Qwen3VlCli, MmprojOfAnotherWidthIsNamed) {
  const std::string narrow = test::scratch_path("narrow-mmproj.gguf");
  write_narrowed_mmproj(dir_ + "/mmproj-f32.gguf", narrow, 32);
  std::string out;
  EXPECT_EQ(run("logits -m " + dir_ + "/model-f32.gguf --mmproj " + narrow + " --image " + dir_ +
                    "/image.png --tokens " + ids_ + " --out " + test::scratch_path("w.f32"),
                &out),
            2)
      << out;
  EXPECT_NE(out.find("the vision tower's projection width 32 does not match the text model's 64"),
            std::string::npos)
      << out;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Qwen3VlCli, ::testing::Values("qwen3_vl", "qwen3_vl_moe"),
                         [](const auto& i) { return i.param; });

}  // namespace
}  // namespace ts
