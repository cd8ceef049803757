// Embeddings of a Qwen3-Embedding-style fixture (tools/reference/make_embedding_fixture.py): the
// HF directory (sentence-transformers' modules, a bare-decoder checkpoint) and its GGUF
// (llama.cpp's converter, pooling_type 3) give sentence-transformers' vectors, tokens included (the
// EOS the tokenizer appends); mean and first-token pooling give transformers' pooled hidden states,
// in one chunk or many. A pass that mixes logits and hidden-state rows gives each what it gives
// alone. Models without pooling, or with a pooling not served, are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "fixture_models.h"
#include "formats/gguf_writer.h"
#include "model/model_source.h"
#include "model/pooling.h"
#include "rope_scaling_cases.h"
#include "runtime/embedding.h"
#include "runtime/model_tokenizer.h"
#include "test_paths.h"

namespace ts {
namespace {

using nlohmann::json;

std::string fixture(const std::string& file) {
  return test::fixtures_dir() + "/models/qwen3_embedding/" + file;
}

json reference() {
  std::ifstream f(fixture("ref.json"));
  return json::parse(f);
}

std::unique_ptr<Engine> open_engine(const std::string& path, int64_t prefill_batch = 0) {
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 2;
  o.ctx = 128;
  o.prefill_batch = prefill_batch;
  o.kv_type = DType::F32;  // the reference ran in f32 throughout
  return Engine::open(path, o);
}

// Every reference input through `spec`'s pooling: each vector's cosine with `key`'s reference,
// the token ids the model's own tokenizer gives checked against the reference's.
void expect_references(const std::string& path, const EmbeddingSpec& spec, const char* key,
                       int64_t prefill_batch = 0) {
  const json ref = reference();
  auto engine = open_engine(path, prefill_batch);
  const Tokenizer tok = load_tokenizer(engine->spec());
  Embedder embedder(*engine, spec);
  for (size_t i = 0; i < ref["inputs"].size(); ++i) {
    const std::vector<int32_t> ids = embedding_tokens(tok, ref["inputs"][i].get<std::string>());
    EXPECT_EQ(ids, ref["ids"][i].get<std::vector<int32_t>>()) << "input " << i;
    const std::vector<float> got = embedder.embed(ids);
    const auto want = ref[key][i].get<std::vector<float>>();
    ASSERT_EQ(got.size(), want.size());
    EXPECT_GE(test::cosine(got, want), 0.9999) << key << " input " << i << " of " << path;
    double norm = 0;
    for (float v : got) norm += double(v) * v;
    if (spec.normalize) {
      EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-5);
    }
  }
}

TEST(Embeddings, HfDirectoryMatchesSentenceTransformers) {
  const EmbeddingSpec spec = read_embedding_spec(*ModelSource::open(fixture("hf")));
  EXPECT_EQ(spec.pooling, Pooling::Last);
  EXPECT_TRUE(spec.normalize);
  expect_references(fixture("hf"), spec, "embeddings");
}

TEST(Embeddings, GgufMatchesSentenceTransformers) {
  const EmbeddingSpec spec = read_embedding_spec(*ModelSource::open(fixture("model-f32.gguf")));
  EXPECT_EQ(spec.pooling, Pooling::Last);
  EXPECT_TRUE(spec.normalize);
  expect_references(fixture("model-f32.gguf"), spec, "embeddings");
  // A prompt fed in chunks of 4 rows: only the last chunk's last row is pooled.
  expect_references(fixture("model-f32.gguf"), spec, "embeddings", 4);
}

TEST(Embeddings, MeanAndFirstTokenPoolingOverChunks) {
  for (const int64_t batch : {0, 3}) {
    expect_references(fixture("model-f32.gguf"), {Pooling::Mean, false, ""}, "mean", batch);
    expect_references(fixture("model-f32.gguf"), {Pooling::Cls, false, ""}, "cls", batch);
  }
}

// One pass holding a chunk that wants logits and one that wants hidden states gives each what it
// gives in a pass of its own: the hidden rows skip the head without moving the logits' rows.
TEST(Embeddings, MixedPassKeepsLogitsAndHiddenApart) {
  auto engine = open_engine(fixture("model-f32.gguf"));
  const int64_t V = engine->cfg().n_vocab, d = engine->cfg().n_embd;
  const std::vector<int32_t> a = {45, 84, 76, 65, 265, 320}, b = {64, 82, 220, 16, 320};
  Forward fwd(*engine, 16);
  const auto alone = [&](bool hidden_first) {
    KvCache ka(*engine, 32), kb(*engine, 32);
    std::vector<float> logits(a.size() * V), hidden(b.size() * d);
    SeqChunk ca{&ka, a.data(), static_cast<int64_t>(a.size()), logits.data(), true};
    SeqChunk cb{&kb, b.data(), static_cast<int64_t>(b.size())};
    cb.hidden = hidden.data();
    cb.all_rows = true;
    fwd.run(hidden_first ? std::vector<SeqChunk>{cb, ca} : std::vector<SeqChunk>{ca, cb});
    return std::pair{logits, hidden};
  };
  KvCache k1(*engine, 32), k2(*engine, 32);
  std::vector<float> logits(a.size() * V), hidden(b.size() * d);
  fwd.run({SeqChunk{&k1, a.data(), static_cast<int64_t>(a.size()), logits.data(), true}});
  SeqChunk ch{&k2, b.data(), static_cast<int64_t>(b.size())};
  ch.hidden = hidden.data();
  ch.all_rows = true;
  fwd.run({ch});
  for (const bool hidden_first : {false, true}) {
    const auto [l, h] = alone(hidden_first);
    test::expect_close(l, logits, 1e-5f, 1e-5f, "logits beside hidden rows");
    test::expect_close(h, hidden, 1e-5f, 1e-5f, "hidden rows beside logits");
  }
}

TEST(Embeddings, ModelWithoutPoolingIsRefusedByName) {
  const std::string plain = test::fixture_gguf("qwen3");
  const EmbeddingSpec spec = read_embedding_spec(*ModelSource::open(plain));
  EXPECT_EQ(spec.pooling, Pooling::None);
  try {
    Pooler pooler(spec, 64);
    FAIL() << "a model without pooling was pooled";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("model declares no pooling"), std::string::npos);
  }
  const auto with_type = [&](int64_t type, const std::string& name) {
    return test::gguf_with_keys(plain, {{"qwen3.pooling_type", gguf_int(GgufType::U32, type)}},
                                name);
  };
  try {
    read_embedding_spec(*ModelSource::open(with_type(4, "rank")));
    FAIL() << "rank pooling was read as an embedding model's";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reranker"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_embedding_spec(*ModelSource::open(with_type(9, "nine"))), Error);
  EXPECT_EQ(read_embedding_spec(*ModelSource::open(with_type(1, "mean"))).pooling, Pooling::Mean);
  EXPECT_EQ(read_embedding_spec(*ModelSource::open(with_type(2, "cls"))).pooling, Pooling::Cls);
}

}  // namespace
}  // namespace ts
