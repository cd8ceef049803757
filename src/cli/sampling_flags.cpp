#include "cli/sampling_flags.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <exception>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>

#include "constrain/json_schema.h"
#include "core/error.h"
#include "core/json_nesting.h"
#include "runtime/prompt_lookup.h"

namespace ts::cli {
namespace {

// llama.cpp's spelling: TOKEN_ID+BIAS or TOKEN_ID-BIAS (15043+1.5; 2-inf or 2-100 bans token 2).
std::pair<int32_t, float> parse_logit_bias(const std::string& s) {
  // A parse error, which the command line reports as its usage errors.
  const auto bad = [&s]() -> std::pair<int32_t, float> {
    throw CLI::ValidationError("--logit-bias", "'" + s +
                                                   "' is not TOKEN_ID+BIAS or TOKEN_ID-BIAS "
                                                   "(e.g. 15043+1, 2-inf)");
  };
  const size_t sign = s.find_first_of("+-");
  if (sign == 0 || sign > 10 || s.find_first_not_of("0123456789") != sign) return bad();
  const long long id = std::stoll(s.substr(0, sign));
  if (id > std::numeric_limits<int32_t>::max()) return bad();
  size_t used = 0;
  float bias = 0;
  try {
    bias = std::stof(s.substr(sign), &used);
  } catch (const std::exception&) {
    return bad();
  }
  if (used != s.size() - sign) return bad();
  return {static_cast<int32_t>(id), bias};
}

}  // namespace

void add_sampling_flags(CLI::App* app, SamplingFlags& f) {
  app->add_option("-n,--n-predict", f.n_predict,
                  "Tokens to generate (-1: until EOS or the context is full)");
  app->add_option("--temp", f.params.temperature, "Temperature (0: greedy)")
      ->check(CLI::Range(0.0, 100.0));
  app->add_option("--top-k", f.params.top_k, "Top-k (0: off)");
  app->add_option("--top-p", f.params.top_p, "Top-p (1: off)")->check(CLI::Range(0.0, 1.0));
  app->add_option("--min-p", f.params.min_p, "Min-p (0: off)")->check(CLI::Range(0.0, 1.0));
  app->add_option("--repeat-penalty", f.params.repeat_penalty, "Repetition penalty (1: off)");
  app->add_option("--presence-penalty", f.params.presence_penalty, "Presence penalty");
  app->add_option("--frequency-penalty", f.params.frequency_penalty, "Frequency penalty");
  app->add_option("--repeat-last-n", f.params.penalty_last_n,
                  "Tokens the penalties look back over (-1: all)");
  app->add_option_function<std::vector<std::string>>(
      "--logit-bias",
      [&f](const std::vector<std::string>& specs) {
        for (const std::string& spec : specs) f.params.logit_bias.push_back(parse_logit_bias(spec));
      },
      "Add BIAS to a token's logit, as TOKEN_ID+BIAS or TOKEN_ID-BIAS (repeatable; -inf or -100 "
      "bans the token)");
  app->add_option("-s,--seed", f.seed, "Random seed (-1: from the clock)");
  app->add_flag("--ignore-eos", f.ignore_eos, "Keep generating past end-of-sequence tokens");
  app->add_option("--stop", f.stop, "Stop when this string is generated (repeatable)");
  app->add_flag("--json-mode", f.json_object,
                "JSON mode: generate one JSON object (tokens are masked to those that continue "
                "it; its closing brace ends the answer)");
  app->add_option("--json-schema", f.json_schema,
                  "Generate one JSON object that satisfies this JSON Schema (inline JSON; see "
                  "docs/DESIGN-NOTES.md for the keywords implemented)");
  app->add_option("--json-schema-file", f.json_schema_file, "--json-schema, read from a file")
      ->check(CLI::ExistingFile);
  app->add_option("--lookup", f.lookup,
                  "Prompt lookup decoding: guess up to N tokens a step from the prompt and the "
                  "answer so far, checked in the same forward pass (same output, fewer passes "
                  "where the text repeats; 0: off)")
      ->check(CLI::Range(int64_t{0}, kMaxLookup));
}

namespace {

// The schema of --json-mode / --json-schema / --json-schema-file; null for free text.
std::shared_ptr<const JsonSchema> answer_schema(const SamplingFlags& f) {
  const int given =
      int{f.json_object} + int{!f.json_schema.empty()} + int{!f.json_schema_file.empty()};
  if (given > 1)
    fail(ErrorKind::Usage, "--json-mode, --json-schema and --json-schema-file exclude each other");
  if (f.json_object) return JsonSchema::any_object();
  if (given == 0) return nullptr;
  std::string text = f.json_schema;
  if (text.empty()) {
    std::ifstream in(f.json_schema_file, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  const nlohmann::json schema = parse_json_bounded(text, "--json-schema", ErrorKind::Usage);
  return std::make_shared<const JsonSchema>(JsonSchema::compile(schema));
}

}  // namespace

GenerateOptions generate_options(const SamplingFlags& f) {
  GenerateOptions o;
  o.max_tokens = f.n_predict;
  o.ignore_eos = f.ignore_eos;
  o.json = answer_schema(f);
  o.stop = f.stop;
  o.lookup = f.lookup;
  o.sampling = f.params;
  o.sampling.seed =
      f.seed >= 0
          ? static_cast<uint64_t>(f.seed)
          : static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return o;
}

}  // namespace ts::cli
