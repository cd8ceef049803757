// Reads configuration values from either source by the key each source uses for them: a GGUF key
// (prefixed with "<architecture>." unless it starts with "general.") or a config.json path
// ("rope_parameters/rope_theta"). A family passes nullptr for a key its source does not have.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/arch_config.h"

namespace ts {

class ModelSource;

class ConfigView {
 public:
  // `hf_root`: the config.json object the values live in ("vision_config"); by default the text
  // decoder's (ModelSource::text_config_root). A path starting with '/' reads from the top.
  explicit ConfigView(const ModelSource& source, const char* hf_root = nullptr);

  SourceKind kind() const { return kind_; }
  bool is_gguf() const { return kind_ == SourceKind::Gguf; }

  std::optional<int64_t> opt_int(const char* gguf_key, const char* hf_key) const;
  std::optional<double> opt_float(const char* gguf_key, const char* hf_key) const;
  std::optional<bool> opt_bool(const char* gguf_key, const char* hf_key) const;
  std::optional<std::string> opt_string(const char* gguf_key, const char* hf_key) const;
  // A GGUF array of integers or bools (HF configs hold lists as JSON: hf_value()).
  std::optional<std::vector<int64_t>> opt_gguf_ints(const char* gguf_key) const;
  // Whether the GGUF key is present and an array (keys that hold one value or one per layer).
  bool gguf_is_array(const char* gguf_key) const;
  // As above, but a missing key is an error naming the file and the key.
  int64_t req_int(const char* gguf_key, const char* hf_key) const;
  double req_float(const char* gguf_key, const char* hf_key) const;
  // config.json value at `path`, or nullptr (always nullptr for GGUF).
  const nlohmann::json* hf_value(const char* path) const;
  // Whether the source holds a tensor of this name (for the keys a converter does not write).
  bool has_tensor(const std::string& name) const;

  [[noreturn]] void missing(const char* gguf_key, const char* hf_key) const;
  [[noreturn]] void invalid(const std::string& key, const std::string& why) const;
  std::string where() const;  // the file values come from, for messages

 private:
  std::string gguf_key(const char* key) const;
  const ModelSource& source_;
  SourceKind kind_;
  std::string arch_;
  std::string hf_root_;
};

}  // namespace ts
