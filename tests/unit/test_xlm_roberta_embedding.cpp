// XLM-RoBERTa (bge-m3's and multilingual-e5's architecture) through the BERT encoder on the
// xlm_roberta fixture (tools/reference/make_xlm_roberta_fixture.py): its HF directory (the
// position table read from pad_token_id + 1 on) and its GGUF (llama.cpp's converter, the table
// chopped there) give sentence-transformers' CLS-pooled, normalised vectors (bge-m3's pooling)
// and transformers' mean of the final states (multilingual-e5's), from the ids HF's Unigram
// tokenizer gives. Batches give each text its own vector; what the encoder cannot take is
// refused by name.
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
#include "runtime/model_tokenizer.h"
#include "test_paths.h"

namespace ts {
namespace {

using nlohmann::json;

std::string fixture(const std::string& file) {
  return test::fixtures_dir() + "/models/xlm_roberta/" + file;
}

json reference() {
  return test::read_references(fixture(""));
}

// Every reference input through `spec`'s pooling against `key`'s vectors: the cosine the issue
// asks for and the elementwise bound `tol` f32 throughout gives (a few float roundings: 2.6e-7
// measured on the normalised vectors, 7.2e-7 on the means, whose elements reach 2.9).
void expect_references(const std::string& path, const EmbeddingSpec& spec, const char* key,
                       float tol) {
  test::expect_encoder_references(path, reference(), spec, key, tol);
}

TEST(XlmRobertaEmbedding, ConfigIsABertEncoderWithoutThePaddingPositions) {
  for (const char* form : {"hf", "model-f32.gguf"}) {
    const auto encoder = Encoder::open(fixture(form), "cpu", 1);
    const ArchConfig& c = encoder->cfg();
    EXPECT_EQ(c.family, Family::Bert) << form;
    EXPECT_EQ(c.stack, LayerStack::Encoder) << form;
    EXPECT_EQ(c.n_embd, 32) << form;
    EXPECT_EQ(c.n_layer, 2) << form;
    EXPECT_EQ(c.n_vocab, 220) << form;
    // 66 rows in the HF table, 2 of them before position 0; the GGUF's has the 64 only.
    EXPECT_EQ(c.encoder.n_positions, 64) << form;
    EXPECT_EQ(c.encoder.position_offset, std::string(form) == "hf" ? 2 : 0) << form;
    EXPECT_FLOAT_EQ(c.encoder.norm_eps, 1e-5f) << form;
  }
}

TEST(XlmRobertaEmbedding, HfDirectoryMatchesSentenceTransformers) {
  const EmbeddingSpec spec = read_embedding_spec(*ModelSource::open(fixture("hf")));
  EXPECT_EQ(spec.pooling, Pooling::Cls);
  EXPECT_TRUE(spec.normalize);
  expect_references(fixture("hf"), spec, "embeddings", 3e-7f);
}

TEST(XlmRobertaEmbedding, GgufMatchesSentenceTransformers) {
  const EmbeddingSpec spec = read_embedding_spec(*ModelSource::open(fixture("model-f32.gguf")));
  EXPECT_EQ(spec.pooling, Pooling::Cls);
  EXPECT_TRUE(spec.normalize);
  expect_references(fixture("model-f32.gguf"), spec, "embeddings", 3e-7f);
}

TEST(XlmRobertaEmbedding, MeanPoolingIsTheStatesMean) {
  for (const char* form : {"hf", "model-f32.gguf"})
    expect_references(fixture(form), {Pooling::Mean, false, ""}, "mean", 1e-6f);
}

// The two forms are one model: the same vectors bit for bit.
TEST(XlmRobertaEmbedding, FormsAgreeBitForBit) {
  const json ref = reference();
  const auto hf = Encoder::open(fixture("hf"), "cpu", 2);
  const auto gguf = Encoder::open(fixture("model-f32.gguf"), "cpu", 2);
  Pooler pooler({Pooling::Mean, false, ""}, 32);
  for (const json& ids : ref["ids"])
    EXPECT_EQ(hf->embed(ids.get<std::vector<int32_t>>(), pooler),
              gguf->embed(ids.get<std::vector<int32_t>>(), pooler));
}

TEST(XlmRobertaEmbedding, TextsBatchedGiveEachTheirOwnVector) {
  const json ref = reference();
  const auto encoder = Encoder::open(fixture("hf"), "cpu", 2);
  std::vector<std::vector<int32_t>> texts;
  for (const json& ids : ref["ids"]) texts.push_back(ids.get<std::vector<int32_t>>());
  texts.push_back(texts[0]);
  for (const EmbeddingSpec& spec :
       {read_embedding_spec(encoder->source()), EmbeddingSpec{Pooling::Mean, true, ""}}) {
    Pooler pooler(spec, encoder->cfg().n_embd);
    const std::vector<std::vector<float>> batched = encoder->embed(texts, pooler);
    ASSERT_EQ(batched.size(), texts.size());
    for (size_t i = 0; i < texts.size(); ++i)
      EXPECT_EQ(batched[i], encoder->embed(texts[i], pooler)) << "text " << i;
  }
}

// The 64 positions are the table's rows after the padding ones, in both forms; an HF config
// whose pad_token_id leaves none is refused naming it.
TEST(XlmRobertaEmbedding, RefusalsAreNamed) {
  for (const char* form : {"hf", "model-f32.gguf"}) {
    const auto encoder = Encoder::open(fixture(form), "cpu", 1);
    EXPECT_NE(test::error_text([&] {
                encoder->hidden(std::vector<int32_t>(65, 5));
              }).find("65 tokens exceed the encoder's 64 positions"),
              std::string::npos)
        << form;
  }
  const std::string dir = test::scratch_path("xlmr_pad");
  ASSERT_EQ(test::run_command("rm -rf " + dir + " && cp -r " + fixture("hf") + " " + dir), 0);
  json config = json::parse(std::ifstream(dir + "/config.json"));
  config["pad_token_id"] = 65;
  std::ofstream(dir + "/config.json") << config.dump();
  EXPECT_NE(test::error_text([&] {
              Encoder::open(dir, "cpu", 1);
            }).find("config.json: 'pad_token_id': 65 leaves no positions of 66"),
            std::string::npos);
}

TEST(XlmRobertaEmbedding, EmbedCommandPrintsTheVectors) {
  const json ref = reference();
  for (const char* form : {"model-f32.gguf", "hf"}) {
    std::string out;
    const std::string cmd = test::binary_path() + " embed -m " + fixture(form) + " -t 1 '" +
                            ref["inputs"][3].get<std::string>() + "' 2>&1";
    ASSERT_EQ(test::run_command(cmd, &out), 0) << out;
    const auto got = json::parse(out.substr(0, out.find('\n'))).get<std::vector<float>>();
    EXPECT_GE(test::cosine(got, ref["embeddings"][3].get<std::vector<float>>()), 0.9999) << form;
  }
}

}  // namespace
}  // namespace ts
