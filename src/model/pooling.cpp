#include "model/pooling.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_nesting.h"
#include "core/mapped_file.h"
#include "formats/gguf.h"
#include "model/model_source.h"

namespace ts {
namespace {

using nlohmann::json;

const char* const kNoPooling =
    "model declares no pooling; an embedding model's file names one (GGUF <arch>.pooling_type, "
    "or sentence-transformers' modules.json with a Pooling module)";

json read_json_file(const std::string& path) {
  const MappedFile file(path);
  const auto* p = reinterpret_cast<const char*>(file.data());
  return parse_json_bounded({p, file.size()}, path, ErrorKind::Model);
}

EmbeddingSpec from_gguf(const ModelSource& source) {
  const std::string key = source.architecture() + ".pooling_type";
  const std::optional<int64_t> type = source.gguf()->get_int(key);
  EmbeddingSpec s;
  s.normalize = true;
  switch (type.value_or(0)) {
    case 0:
      s.why_none = kNoPooling;
      return s;
    case 1:
      s.pooling = Pooling::Mean;
      return s;
    case 2:
      s.pooling = Pooling::Cls;
      return s;
    case 3:
      s.pooling = Pooling::Last;
      return s;
    case 4:
      fail(ErrorKind::Unsupported,
           source.path() + ": " + key + " is 4 (rank): a reranker, not an embedding model");
    default:
      fail(ErrorKind::Model,
           source.path() + ": " + key + " " + std::to_string(*type) + " is not a pooling type");
  }
}

// The pooling_mode_* flags of 1_Pooling/config.json (or the newer single "pooling_mode").
Pooling pooling_mode(const json& cfg, const std::string& path) {
  const auto on = [&](const char* k) { return cfg.value(k, false); };
  if (on("pooling_mode_mean_tokens")) return Pooling::Mean;
  if (on("pooling_mode_cls_token")) return Pooling::Cls;
  if (on("pooling_mode_lasttoken")) return Pooling::Last;
  const std::string mode = cfg.value("pooling_mode", "");
  if (mode == "mean") return Pooling::Mean;
  if (mode == "cls") return Pooling::Cls;
  if (mode == "lasttoken") return Pooling::Last;
  fail(ErrorKind::Unsupported,
       path +
           ": pooling mode not supported (mean, cls and lasttoken are); the file sets none of "
           "them");
}

EmbeddingSpec from_hf_dir(const ModelSource& source) {
  namespace fs = std::filesystem;
  EmbeddingSpec s;
  const std::string modules_path = source.path() + "/modules.json";
  if (!fs::exists(modules_path)) {
    s.why_none = kNoPooling;
    return s;
  }
  const json modules = read_json_file(modules_path);
  if (!modules.is_array()) fail(ErrorKind::Model, modules_path + ": not a list of modules");
  std::string pooling_dir;
  for (const json& m : modules) {
    if (!m.is_object() || !m.contains("type") || !m["type"].is_string())
      fail(ErrorKind::Model, modules_path + ": a module without a 'type'");
    const std::string type = m["type"].get<std::string>();
    if (type.ends_with("Pooling") && pooling_dir.empty()) pooling_dir = m.value("path", "");
    if (type.ends_with("Normalize")) s.normalize = true;
  }
  if (pooling_dir.empty()) {
    s.why_none = kNoPooling;
    return s;
  }
  const std::string cfg_path = source.path() + "/" + pooling_dir + "/config.json";
  if (!fs::exists(cfg_path)) fail(ErrorKind::Model, cfg_path + ": missing (named by modules.json)");
  const json cfg = read_json_file(cfg_path);
  if (!cfg.is_object()) fail(ErrorKind::Model, cfg_path + ": not a JSON object");
  s.pooling = pooling_mode(cfg, cfg_path);
  return s;
}

}  // namespace

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::None:
      return "none";
    case Pooling::Mean:
      return "mean";
    case Pooling::Cls:
      return "cls";
    case Pooling::Last:
      return "last";
  }
  return "?";
}

EmbeddingSpec read_embedding_spec(const ModelSource& source) {
  return source.kind() == SourceKind::Gguf ? from_gguf(source) : from_hf_dir(source);
}

}  // namespace ts
