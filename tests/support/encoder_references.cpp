#include "encoder_references.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <vector>

#include "fixture_models.h"
#include "runtime/embedding.h"
#include "runtime/encoder.h"
#include "runtime/model_tokenizer.h"

namespace ts::test {

nlohmann::json read_references(const std::string& dir) {
  std::ifstream f(dir + "/ref.json");
  return nlohmann::json::parse(f);
}

void expect_encoder_references(const std::string& path, const nlohmann::json& ref,
                               const EmbeddingSpec& spec, const char* key, float tol) {
  const auto encoder = Encoder::open(path, "cpu", 2);
  const Tokenizer tok = load_tokenizer(encoder->source());
  Pooler pooler(spec, encoder->cfg().n_embd);
  for (size_t i = 0; i < ref["inputs"].size(); ++i) {
    const std::vector<int32_t> ids = embedding_tokens(tok, ref["inputs"][i].get<std::string>());
    EXPECT_EQ(ids, ref["ids"][i].get<std::vector<int32_t>>()) << "input " << i;
    const std::vector<float> got = encoder->embed(ids, pooler);
    const auto want = ref[key][i].get<std::vector<float>>();
    ASSERT_EQ(got.size(), want.size());
    EXPECT_GE(cosine(got, want), 0.9999) << key << " input " << i << " of " << path;
    float worst = 0;
    for (size_t e = 0; e < got.size(); ++e) worst = std::max(worst, std::abs(got[e] - want[e]));
    EXPECT_LE(worst, tol) << key << " input " << i << " of " << path;
  }
}

}  // namespace ts::test
