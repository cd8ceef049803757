// JSON mode's and JSON schemas' cost per generated token: JsonConstraint::mask over a real
// vocabulary at every step of writing one document (its tokens fed with advance() between the
// masks), one thread. Counter per_step: the mean time of a step (mask and advance), in seconds.
//
//   build/bench/bench_json_mask MODEL.gguf [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "constrain/json_constraint.h"
#include "constrain/json_schema.h"
#include "formats/gguf.h"
#include "text/constraint_vocabulary.h"
#include "text/tokenizer.h"

namespace ts {
namespace {

const char* kDocument = R"({
  "name": "Whiskers",
  "age": 4,
  "species": "cat",
  "colors": ["black", "white"],
  "indoor": true,
  "owner": {"name": "Ada Lovelace", "city": "London"}
})";

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 40},
    "age": {"type": "integer"},
    "species": {"enum": ["cat", "dog", "bird"]},
    "colors": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
    "indoor": {"type": "boolean"},
    "owner": {"type": "object", "properties": {"name": {"type": "string"},
              "city": {"type": "string"}}, "required": ["name"]}
  },
  "required": ["name", "age", "species"],
  "additionalProperties": false
})";

void mask_document(benchmark::State& state, const Tokenizer* tok,
                   std::shared_ptr<const JsonSchema> schema) {
  const auto vocab = json_vocabulary(*tok);
  const std::vector<int32_t> tokens = tok->encode(kDocument, false, false);
  std::vector<float> logits(vocab->pieces.size());
  for (auto _ : state) {
    JsonConstraint c(vocab, schema);
    for (int32_t t : tokens) {
      c.mask(logits);
      c.advance(t);
    }
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["steps"] = static_cast<double>(tokens.size());
  state.counters["per_step"] = benchmark::Counter(
      static_cast<double>(tokens.size()),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

}  // namespace
}  // namespace ts

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: %s MODEL.gguf [benchmark flags]\n", argv[0]);
    return 1;
  }
  static const ts::Tokenizer tok = ts::Tokenizer::from_gguf(*ts::GgufFile::open(argv[1]));
  const auto schema = std::make_shared<const ts::JsonSchema>(
      ts::JsonSchema::compile(nlohmann::json::parse(ts::kSchema)));
  benchmark::RegisterBenchmark("mask/json_object", ts::mask_document, &tok,
                               ts::JsonSchema::any_object())
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("mask/json_schema", ts::mask_document, &tok, schema)
      ->Unit(benchmark::kMillisecond);
  argv[1] = argv[0];
  int rest = argc - 1;
  benchmark::Initialize(&rest, argv + 1);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
