// An encoder fixture's references (tools/reference/make_*_fixture.py: ref.json's "inputs", "ids"
// and vectors by pooling) against what the encoder makes of each input.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/pooling.h"

namespace ts::test {

// ref.json of the fixture folder `dir`.
nlohmann::json read_references(const std::string& dir);

// Every input of `ref` through the encoder at `path` (2 threads) and `spec`'s pooling: the
// tokenizer's ids equal ref["ids"], and each vector is ref[key]'s within cosine 0.9999 and the
// elementwise bound `tol`.
void expect_encoder_references(const std::string& path, const nlohmann::json& ref,
                               const EmbeddingSpec& spec, const char* key, float tol);

}  // namespace ts::test
