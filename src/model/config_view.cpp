#include "model/config_view.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "model/model_source.h"

namespace ts {

ConfigView::ConfigView(const ModelSource& source, const char* hf_root)
    : source_(source),
      kind_(source.kind()),
      arch_(source.architecture()),
      hf_root_(hf_root != nullptr ? hf_root : source.text_config_root()) {}

bool ConfigView::has_tensor(const std::string& name) const {
  return source_.find(name).has_value();
}

std::string ConfigView::where() const {
  return kind_ == SourceKind::Gguf ? source_.path() : source_.path() + "/config.json";
}

std::string ConfigView::gguf_key(const char* key) const {
  if (std::strncmp(key, "general.", 8) == 0 || std::strncmp(key, "tokenizer.", 10) == 0) return key;
  return arch_ + "." + key;
}

const nlohmann::json* ConfigView::hf_value(const char* path) const {
  if (kind_ != SourceKind::HfDir || path == nullptr) return nullptr;
  const nlohmann::json* node = &source_.hf()->config();
  std::string p(path);
  if (p.starts_with('/'))
    p.erase(0, 1);
  else if (!hf_root_.empty())
    p = hf_root_ + "/" + p;
  size_t start = 0;
  while (start <= p.size()) {
    const size_t slash = p.find('/', start);
    const std::string part =
        p.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (!node->is_object()) return nullptr;
    auto it = node->find(part);
    if (it == node->end() || it->is_null()) return nullptr;
    node = &*it;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return node;
}

std::optional<int64_t> ConfigView::opt_int(const char* gk, const char* hk) const {
  if (kind_ == SourceKind::Gguf) return gk ? source_.gguf()->get_int(gguf_key(gk)) : std::nullopt;
  const nlohmann::json* v = hf_value(hk);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) invalid(hk, "expected an integer");
  return v->get<int64_t>();
}

std::optional<double> ConfigView::opt_float(const char* gk, const char* hk) const {
  if (kind_ == SourceKind::Gguf) return gk ? source_.gguf()->get_float(gguf_key(gk)) : std::nullopt;
  const nlohmann::json* v = hf_value(hk);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) invalid(hk, "expected a number");
  return v->get<double>();
}

std::optional<bool> ConfigView::opt_bool(const char* gk, const char* hk) const {
  if (kind_ == SourceKind::Gguf) return gk ? source_.gguf()->get_bool(gguf_key(gk)) : std::nullopt;
  const nlohmann::json* v = hf_value(hk);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) invalid(hk, "expected true or false");
  return v->get<bool>();
}

std::optional<std::vector<int64_t>> ConfigView::opt_gguf_ints(const char* gk) const {
  if (kind_ != SourceKind::Gguf) return std::nullopt;
  const GgufArray* a = source_.gguf()->get_array(gguf_key(gk));
  if (a == nullptr) return std::nullopt;
  if (a->ints.size() != a->size()) invalid(gguf_key(gk), "expected an array of integers or bools");
  return a->ints;
}

bool ConfigView::gguf_is_array(const char* gk) const {
  if (kind_ != SourceKind::Gguf) return false;
  const GgufValue* v = source_.gguf()->find(gguf_key(gk));
  return v != nullptr && v->type == GgufType::Array;
}

std::optional<std::string> ConfigView::opt_string(const char* gk, const char* hk) const {
  if (kind_ == SourceKind::Gguf)
    return gk ? source_.gguf()->get_string(gguf_key(gk)) : std::nullopt;
  const nlohmann::json* v = hf_value(hk);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) invalid(hk, "expected a string");
  return v->get<std::string>();
}

int64_t ConfigView::req_int(const char* gk, const char* hk) const {
  auto v = opt_int(gk, hk);
  if (!v) missing(gk, hk);
  return *v;
}

double ConfigView::req_float(const char* gk, const char* hk) const {
  auto v = opt_float(gk, hk);
  if (!v) missing(gk, hk);
  return *v;
}

void ConfigView::missing(const char* gk, const char* hk) const {
  std::string key = kind_ == SourceKind::Gguf ? (gk ? gguf_key(gk) : "?") : (hk ? hk : "?");
  if (kind_ == SourceKind::HfDir && hk != nullptr && !hf_root_.empty() && hk[0] != '/')
    key = hf_root_ + "/" + key;
  fail(ErrorKind::Model, where() + ": missing '" + key + "', required by family " + arch_);
}

void ConfigView::invalid(const std::string& key, const std::string& why) const {
  fail(ErrorKind::Model, where() + ": '" + key + "': " + why);
}

}  // namespace ts
