// The BERT encoder (runtime/encoder.h) on the bert_embedding fixture
// (tools/reference/make_bert_fixture.py): its HF directory and its GGUF (llama.cpp's converter)
// give sentence-transformers' mean-pooled, normalised vectors and transformers' first-token
// states, from the ids HF's tokenizer gives; `turbospark embed` prints the same. What the encoder
// cannot do is refused by name: generation, a CUDA backend, a text longer than its positions.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "encoder_references.h"
#include "fixture_models.h"
#include "model/model_source.h"
#include "model/pooling.h"
#include "runtime/embedding.h"
#include "runtime/encoder.h"
#include "runtime/engine.h"
#include "runtime/model_tokenizer.h"
#include "test_paths.h"

namespace ts {
namespace {

using nlohmann::json;

std::string fixture(const std::string& file) {
  return test::fixtures_dir() + "/models/bert_embedding/" + file;
}

json reference() {
  return test::read_references(fixture(""));
}

// Every reference input through `spec`'s pooling against `key`'s vectors, within the elementwise
// bound `tol` that f32 throughout gives (a few float roundings of the largest element: 1.3e-7
// measured on the normalised vectors, 1.0e-6 on the first-token states, whose elements reach 3.8).
void expect_references(const std::string& path, const EmbeddingSpec& spec, const char* key,
                       float tol) {
  test::expect_encoder_references(path, reference(), spec, key, tol);
}

TEST(BertEmbedding, ConfigIsAnEncoder) {
  const auto encoder = Encoder::open(fixture("model-f32.gguf"), "auto", 1);
  const ArchConfig& c = encoder->cfg();
  EXPECT_EQ(c.family, Family::Bert);
  EXPECT_EQ(c.stack, LayerStack::Encoder);
  EXPECT_EQ(c.n_embd, 32);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.encoder.n_positions, 64);
  EXPECT_FALSE(c.encoder.gelu_tanh);
}

TEST(BertEmbedding, HfDirectoryMatchesSentenceTransformers) {
  const EmbeddingSpec spec = read_embedding_spec(*ModelSource::open(fixture("hf")));
  EXPECT_EQ(spec.pooling, Pooling::Mean);
  EXPECT_TRUE(spec.normalize);
  expect_references(fixture("hf"), spec, "embeddings", 3e-7f);
}

TEST(BertEmbedding, GgufMatchesSentenceTransformers) {
  const EmbeddingSpec spec = read_embedding_spec(*ModelSource::open(fixture("model-f32.gguf")));
  EXPECT_EQ(spec.pooling, Pooling::Mean);
  EXPECT_TRUE(spec.normalize);
  expect_references(fixture("model-f32.gguf"), spec, "embeddings", 3e-7f);
}

TEST(BertEmbedding, ClsPoolingIsTheFirstTokensState) {
  for (const char* form : {"hf", "model-f32.gguf"})
    expect_references(fixture(form), {Pooling::Cls, false, ""}, "cls", 2e-6f);
}

// Texts encoded together (their rows one after the other through every projection, attention
// within each) get the vectors each gets alone, bit for bit, whatever pools them.
TEST(BertEmbedding, TextsBatchedGiveEachTheirOwnVector) {
  const json ref = reference();
  const auto encoder = Encoder::open(fixture("model-f32.gguf"), "cpu", 2);
  std::vector<std::vector<int32_t>> texts;
  for (const json& ids : ref["ids"]) texts.push_back(ids.get<std::vector<int32_t>>());
  texts.push_back(texts[0]);  // the same text twice in one batch
  for (const EmbeddingSpec& spec :
       {read_embedding_spec(encoder->source()), EmbeddingSpec{Pooling::Cls, false, ""},
        EmbeddingSpec{Pooling::Last, true, ""}}) {
    Pooler pooler(spec, encoder->cfg().n_embd);
    const std::vector<std::vector<float>> batched = encoder->embed(texts, pooler);
    ASSERT_EQ(batched.size(), texts.size());
    for (size_t i = 0; i < texts.size(); ++i)
      EXPECT_EQ(batched[i], encoder->embed(texts[i], pooler))
          << "text " << i << ", pooling " << static_cast<int>(spec.pooling);
  }
  // One text the encoder cannot take refuses the batch, naming it.
  texts.emplace_back(65, 5);
  Pooler pooler(read_embedding_spec(encoder->source()), encoder->cfg().n_embd);
  EXPECT_THROW(encoder->embed(texts, pooler), Error);
}

TEST(BertEmbedding, RefusalsAreNamed) {
  const auto message = [](const auto& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EngineOptions o;
  o.backend = "cpu";
  EXPECT_NE(message([&] {
              Engine::open(fixture("model-f32.gguf"), o);
            }).find("bert is an encoder model: it serves embeddings only"),
            std::string::npos);
  EXPECT_NE(message([&] {
              Encoder::open(fixture("hf"), "cuda", 1);
            }).find("runs on the CPU only: use --backend cpu"),
            std::string::npos);
  const auto encoder = Encoder::open(fixture("model-f32.gguf"), "cpu", 1);
  EXPECT_NE(message([&] {
              encoder->hidden(std::vector<int32_t>(65, 5));
            }).find("65 tokens exceed the encoder's 64 positions"),
            std::string::npos);
  EXPECT_NE(message([&] {
              encoder->hidden({2, 300, 3});
            }).find("token id 300 is outside the vocabulary of 300"),
            std::string::npos);
}

TEST(BertEmbedding, EmbedCommandPrintsTheVectors) {
  const json ref = reference();
  for (const char* form : {"model-f32.gguf", "hf"}) {
    std::string out;
    const std::string cmd = test::binary_path() + " embed -m " + fixture(form) + " -t 1 '" +
                            ref["inputs"][0].get<std::string>() + "' '" +
                            ref["inputs"][2].get<std::string>() + "' 2>&1";
    ASSERT_EQ(test::run_command(cmd, &out), 0) << out;
    std::istringstream lines(out);
    std::string line;
    for (const int i : {0, 2}) {
      ASSERT_TRUE(std::getline(lines, line)) << out;
      const auto got = json::parse(line).get<std::vector<float>>();
      EXPECT_GE(test::cosine(got, ref["embeddings"][i].get<std::vector<float>>()), 0.9999) << form;
    }
  }
  std::string out;
  EXPECT_EQ(
      test::run_command(
          test::binary_path() + " embed -m " + fixture("hf") + " --backend cuda hello 2>&1", &out),
      2)
      << out;
  EXPECT_NE(out.find("runs on the CPU only"), std::string::npos) << out;
}

}  // namespace
}  // namespace ts
