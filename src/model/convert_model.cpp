#include "model/convert_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf_writer.h"
#include "formats/safetensors.h"
#include "model/convert_family.h"
#include "model/model_source.h"

namespace ts {

void GgufKvList::set(const std::string& key, GgufValue v) {
  for (auto& [k, old] : kv_)
    if (k == key) {
      old = std::move(v);
      return;
    }
  kv_.emplace_back(key, std::move(v));
}

const GgufValue* GgufKvList::find(const std::string& key) const {
  for (const auto& [k, v] : kv_)
    if (k == key) return &v;
  return nullptr;
}

namespace {

// The rows of the embedding table Gemma's class keeps: the tokenizer's vocabulary (a
// SentencePiece one is padded to vocab_size; tokenizer.json's counts its pieces and added tokens).
int64_t tokenizer_vocab_rows(const std::string& dir, const Hparams& hp) {
  namespace fs = std::filesystem;
  if (fs::exists(dir + "/tokenizer.model")) return hp.req_int("vocab_size");
  std::ifstream f(dir + "/tokenizer.json");
  if (!f) return 0;
  const nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  if (!j.is_object() || !j.contains("model") || !j["model"].contains("vocab")) return 0;
  return static_cast<int64_t>(j["model"]["vocab"].size() +
                              j.value("added_tokens", nlohmann::json::array()).size());
}

// gguf-py's model_weight_count_rounded_notation: at least two significant digits.
std::string rounded_count(uint64_t n) {
  const double x = static_cast<double>(n);
  double scaled;
  const char* suffix;
  if (x > 1e12) {
    scaled = x * 1e-12, suffix = "T";
  } else if (x > 1e9) {
    scaled = x * 1e-9, suffix = "B";
  } else if (x > 1e6) {
    scaled = x * 1e-6, suffix = "M";
  } else {
    scaled = x * 1e-3, suffix = "K";
  }
  std::string whole = std::to_string(static_cast<int64_t>(std::nearbyint(scaled)));
  whole.erase(0, whole.find_first_not_of('0'));
  const int fix = std::max(2 - static_cast<int>(whole.size()), 0);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%s", fix, scaled, suffix);
  return buf;
}

}  // namespace

std::string gguf_size_label(const std::vector<ConvertTensor>& tensors) {
  uint64_t total = 0, shared = 0, expert = 0, expert_sum = 0, expert_tensors = 0;
  for (const ConvertTensor& t : tensors) {
    const uint64_t size = t.elements();
    // Stacked experts of three dimensions or more: the expert count is the outermost (a bias's
    // second); the stacked biases of two count as shared, as gguf-py counts them.
    if (t.name.find("_exps.") != std::string::npos && t.dims.size() >= 3) {
      const uint64_t n = t.name.ends_with(".bias") ? t.dims[1] : t.dims[2];
      expert += size / n;
      expert_sum += n;
      ++expert_tensors;
    } else {
      shared += size;
    }
    total += size;
  }
  if (expert_tensors > 0)
    return std::to_string(expert_sum / expert_tensors) + "x" + rounded_count(shared + expert);
  return rounded_count(total);
}

std::string gguf_model_name(const std::string& dir) {
  std::string base = std::filesystem::path(dir).lexically_normal().filename().string();
  if (base.empty()) base = std::filesystem::path(dir).lexically_normal().parent_path().filename();
  // Words split at '-' and spaces; an all-lower-case word that is not a version or a number is
  // title-cased.
  std::string out, word;
  const auto flush = [&] {
    if (word.empty()) return;
    bool lower = false, upper = false;
    for (char c : word) {
      lower |= std::islower(static_cast<unsigned char>(c)) != 0;
      upper |= std::isupper(static_cast<unsigned char>(c)) != 0;
    }
    const bool version =
        (word[0] == 'v' && word.size() > 1 && std::isdigit(static_cast<unsigned char>(word[1]))) ||
        std::isdigit(static_cast<unsigned char>(word[0]));
    if (lower && !upper && !version) {
      bool start = true;
      for (char& c : word) {
        const bool alpha = std::isalpha(static_cast<unsigned char>(c)) != 0;
        if (alpha) c = static_cast<char>(start ? std::toupper(c) : std::tolower(c));
        start = !alpha;
      }
    }
    out += (out.empty() ? "" : " ") + word;
    word.clear();
  };
  for (char c : base) {
    if (c == '-' || c == ' ')
      flush();
    else
      word.push_back(c);
  }
  flush();
  return out;
}

void write_model_name(const ModelSource& source, KeyWriter& w) {
  // After config's _name_or_path when that is a model id (at most one '/'; an empty one leaves
  // the name out), else after the directory.
  const nlohmann::json& config = source.hf()->config();
  const auto id = config.find("_name_or_path");
  if (id == config.end() || !id->is_string() ||
      std::count(id->get<std::string>().begin(), id->get<std::string>().end(), '/') > 1) {
    w.str("general.name", gguf_model_name(source.path()));
  } else if (!id->get<std::string>().empty()) {
    w.str("general.name", gguf_model_name(id->get<std::string>()));
  }
}

ConvertedModel convert_hf_model(const ModelSource& source) {
  if (source.hf() == nullptr)
    fail(ErrorKind::Usage, source.path() + ": convert reads a Hugging Face directory, not a GGUF");
  const std::string hf_class = source.architecture();
  const ConvertFamily* f = find_convert_family(hf_class);
  if (f == nullptr)
    fail(ErrorKind::Unsupported, source.path() + ": convert does not handle '" + hf_class +
                                     "' (it converts " + convert_family_names() + ")");
  const std::string where = source.path() + "/config.json";
  const Hparams hp(source.hf()->config(), where);
  int64_t blocks = hp.req_int({"n_layers", "num_hidden_layers", "n_layer", "num_layers"});
  if (f->nextn_key != nullptr)
    if (const auto* n = hp.get(f->nextn_key); n != nullptr && n->is_number_integer())
      blocks += n->get<int64_t>();

  ConvertedModel m;
  m.arch = f->arch;
  KeyWriter w(m.kv, f->arch);
  w.str("general.architecture", f->arch);
  w.str("general.type", "model");
  write_model_name(source, w);
  w.str("general.size_label", "");  // set below, once the tensors are known
  write_text_model_keys(hp, blocks, w);
  w.u32("general.file_type", 0);  // the writer sets the output's
  f->keys(hp, source, w);
  w.u32("general.quantization_version", 2);

  const int64_t vocab_rows = (f->fixes & kTrimEmbd) ? tokenizer_vocab_rows(source.path(), hp) : 0;
  m.tensors = convert_tensors(*f, hp, source, blocks, vocab_rows);
  w.str("general.size_label", gguf_size_label(m.tensors));
  if (const auto* n = hp.get("vocab_size"); n != nullptr && n->is_number_integer())
    m.vocab.n_vocab = n->get<int64_t>();

  if (const auto* q = hp.get("quantization_config");
      q != nullptr && q->is_object() && q->value("quant_method", "") == "mxfp4")
    m.float_file_type = 38;  // llama_ftype MOSTLY_MXFP4_MOE
  m.vocab.bpe_pre = f->bpe_pre;
  m.vocab.no_space_prefix = (f->fixes & kNoSpacePrefix) != 0;
  m.vocab.add_prefix_space_key = (f->fixes & kAddPrefixSpaceKey) != 0;
  for (const SpecialToken* s = f->special; s != nullptr && s->type != nullptr; ++s)
    m.vocab.special.emplace_back(s->type, s->text);
  if (f->vocab_rules != nullptr) f->vocab_rules(hp, m.vocab);
  return m;
}

}  // namespace ts
