#include "fixture_models.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "model/model_spec.h"
#include "runtime/engine.h"
#include "runtime/model_tokenizer.h"
#include "runtime/perplexity.h"
#include "runtime/session.h"
#include "test_paths.h"

namespace ts::test {

std::unique_ptr<Engine> open_bundled_model(int64_t ctx) {
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 2;
  o.ctx = ctx;
  return Engine::open(repo_dir() + "/models/tiny-moe-q8_0.gguf", o);
}

std::vector<FixtureForm> fixture_forms(const std::vector<std::string>& fixtures) {
  std::vector<FixtureForm> out;
  for (const std::string& name : fixtures) {
    const std::string shared = shared_path("fixtures/" + name);
    const std::string local = fixtures_dir() + "/models/" + name;
    const std::string dir = shared.empty() ? local : shared;
    if (file_exists(dir + "/hf/config.json")) out.push_back({name, "hf", dir + "/hf", dir});
    for (const char* dt : {"f32", "f16", "mxfp4"}) {
      const std::string file = "/model-" + std::string(dt) + ".gguf";
      if (file_exists(dir + file)) out.push_back({name, dt, dir + file, dir});
    }
  }
  return out;
}

std::string fixture_file(const std::string& fixture, const std::string& file) {
  const std::string shared = shared_path("fixtures/" + fixture + "/" + file);
  if (!shared.empty() && file_exists(shared)) return shared;
  const std::string local = fixtures_dir() + "/models/" + fixture + "/" + file;
  return file_exists(local) ? local : "";
}

std::string fixture_ref_logits(const FixtureForm& f) {
  // A fixture whose weights were rounded to a type names its reference after it.
  const std::string plain = f.dir + "/ref_logits.f32";
  return file_exists(plain)
             ? plain
             : f.dir + "/ref_logits_" + f.fixture.substr(f.fixture.rfind('_') + 1) + ".f32";
}

std::vector<int32_t> fixture_prompt(const FixtureForm& f) {
  const std::string path =
      file_exists(f.dir + "/meta.json") ? f.dir + "/meta.json" : f.dir + "/prompt.json";
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  return j.at("prompt_ids").get<std::vector<int32_t>>();
}

std::vector<float> read_f32_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const auto size = static_cast<size_t>(in.tellg());
  std::vector<float> v(size / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()),
          static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

std::vector<uint8_t> read_bytes_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string ids_csv(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

std::string LogitsComparison::summary() const {
  std::ostringstream s;
  s << "rel=" << rel << " argmax mismatches " << argmax_mismatches << "/" << rows_checked;
  return s.str();
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

double max_rel_error(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double top = 0, diff = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    top = std::max(top, static_cast<double>(std::fabs(want[i])));
    diff = std::max(diff, static_cast<double>(std::fabs(got[i] - want[i])));
  }
  return diff / top;
}

LogitsComparison compare_logits(const std::vector<float>& x, const std::vector<float>& ref,
                                int64_t vocab) {
  LogitsComparison c;
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(x[i]) - ref[i]));
  }
  c.rel = max_diff / max_ref;
  // Argmax is only meaningful on rows whose reference top-1/top-2 gap exceeds 2e-3 * max|ref|.
  for (size_t r = 0; r < ref.size() / static_cast<size_t>(vocab); ++r) {
    const float* a = ref.data() + r * static_cast<size_t>(vocab);
    const float* b = x.data() + r * static_cast<size_t>(vocab);
    std::vector<float> sorted(a, a + vocab);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    if (sorted[0] - sorted[1] <= 2e-3 * max_ref) continue;
    c.rows_checked++;
    if (std::max_element(a, a + vocab) - a != std::max_element(b, b + vocab) - b)
      c.argmax_mismatches++;
  }
  return c;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float atol,
                  float rtol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float tol = atol + rtol * std::fabs(want[i]);
    if (!(std::fabs(got[i] - want[i]) <= tol) && reported++ < 5)
      ADD_FAILURE() << what << " [" << i << "]: got " << got[i] << " want " << want[i] << " tol "
                    << tol;
  }
}

void expect_refused(const std::string& path, const std::string& what) {
  try {
    open_model_spec(path);
    ADD_FAILURE() << "opened; expected an error about " << what;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Model) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

double mean_kl(const std::vector<float>& x, const std::vector<float>& ref, int64_t vocab) {
  const size_t rows = ref.size() / static_cast<size_t>(vocab);
  double total = 0;
  for (size_t r = 0; r < rows; ++r) {
    const float* a = ref.data() + r * static_cast<size_t>(vocab);
    const float* b = x.data() + r * static_cast<size_t>(vocab);
    const double ma = *std::max_element(a, a + vocab), mb = *std::max_element(b, b + vocab);
    double za = 0, zb = 0;
    for (int64_t i = 0; i < vocab; ++i) za += std::exp(a[i] - ma), zb += std::exp(b[i] - mb);
    for (int64_t i = 0; i < vocab; ++i) {
      const double la = a[i] - ma - std::log(za), lb = b[i] - mb - std::log(zb);
      total += std::exp(la) * (la - lb);
    }
  }
  return total / static_cast<double>(rows);
}

std::vector<float> run_logits(const std::string& path, const std::vector<int32_t>& ids,
                              const LogitsRun& r) {
  EngineOptions o;
  o.backend = r.backend;
  o.threads = r.threads;
  o.ctx = std::max<int64_t>(r.ctx, static_cast<int64_t>(ids.size()));  // 80-token prompts
  o.kv_type = r.kv;
  o.prefill_batch = r.batch;
  o.expert_slots = r.slots;
  o.cache_policy = r.policy;
  o.expert_prefetch = r.prefetch;
  o.expert_io = r.io;
  o.ram_budget = r.ram_budget;
  auto engine = Engine::open(path, o);
  Session s(*engine);
  const size_t V = static_cast<size_t>(engine->cfg().n_vocab);
  std::vector<float> logits(ids.size() * V);
  if (r.decode) {
    for (size_t i = 0; i < ids.size(); ++i) s.feed(&ids[i], 1, logits.data() + i * V, false);
  } else {
    s.feed(ids.data(), static_cast<int64_t>(ids.size()), logits.data(), true);
  }
  return logits;
}

LogitsComparison cli_image_logits(const std::string& dir, const std::string& extra, int64_t vocab,
                                  const std::string& model) {
  const auto meta = nlohmann::json::parse(std::ifstream(dir + "/meta.json"));
  const std::string out_file = scratch_path("image_logits.f32");
  std::string out;
  const int rc = run_command(binary_path() + " logits -m " + (model.empty() ? dir + "/hf" : model) +
                                 extra + " --image " +
                                 dir + "/image0.png --image " + dir + "/image1.png --tokens " +
                                 ids_csv(meta["image"]["prompt_ids"].get<std::vector<int32_t>>()) +
                                 " --out " + out_file + " --kv-type f32 -t 2 2>&1",
                             &out);
  EXPECT_EQ(rc, 0) << out;
  return compare_logits(read_f32_file(out_file), read_f32_file(dir + "/ref_logits_image.f32"),
                        vocab);
}

double llama_cpp_method_ppl(const std::string& path, int64_t expert_slots) {
  EngineOptions o;
  o.backend = "cpu";
  o.threads = 2;
  o.ctx = 256;
  o.prefill_batch = 256;
  o.expert_slots = expert_slots;
  auto engine = Engine::open(path, o);
  const Tokenizer tok = load_tokenizer(engine->spec());
  std::ifstream in(fixtures_dir() + "/corpus/valid.txt", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  PerplexityOptions p;
  p.ctx = 256;
  p.bos = tok.bos();
  return perplexity(*engine, tok.encode(text, tok.add_bos(), false), p).ppl;
}

}  // namespace ts::test
