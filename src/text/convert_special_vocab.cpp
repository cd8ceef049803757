// gguf-py's SpecialVocab, read from an HF directory: which token is bos / eos / ..., whether the
// tokenizer adds them, the merges and the chat template (convert_vocab.h).
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "core/json_nesting.h"
#include "core/mapped_file.h"
#include "formats/gguf_writer.h"
#include "text/convert_vocab.h"

namespace ts {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::optional<json> read_json(const std::string& path) {
  if (!fs::is_regular_file(path)) return std::nullopt;
  return parse_json_file(path);
}

std::string read_text(const std::string& path) {
  const MappedFile file(path);
  return {reinterpret_cast<const char*>(file.data()), file.size()};
}

// The GGUF key of each special id type; types without one (cls) are not written.
const char* id_key(const std::string& type) {
  static const std::map<std::string, const char*> keys = {
      {"bos", "tokenizer.ggml.bos_token_id"},     {"eos", "tokenizer.ggml.eos_token_id"},
      {"unk", "tokenizer.ggml.unknown_token_id"}, {"sep", "tokenizer.ggml.seperator_token_id"},
      {"pad", "tokenizer.ggml.padding_token_id"}, {"mask", "tokenizer.ggml.mask_token_id"},
      {"eot", "tokenizer.ggml.eot_token_id"},     {"eom", "tokenizer.ggml.eom_token_id"}};
  auto it = keys.find(type);
  return it == keys.end() ? nullptr : it->second;
}

const char* add_key(const std::string& type) {
  if (type == "bos") return "tokenizer.ggml.add_bos_token";
  if (type == "eos") return "tokenizer.ggml.add_eos_token";
  if (type == "sep") return "tokenizer.ggml.add_sep_token";
  return nullptr;
}

std::string str_or(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string special_token_id(const json& item) {
  if (!item.is_object() || !item.contains("SpecialToken")) return "";
  return str_or(item["SpecialToken"], "id");
}

std::string sequence_id(const json& item) {
  if (!item.is_object() || !item.contains("Sequence")) return "";
  return str_or(item["Sequence"], "id");
}

class SpecialVocab {
 public:
  SpecialVocab(const std::string& dir, bool load_merges, int64_t n_vocab)
      : dir_(dir), load_merges_(load_merges), n_vocab_(n_vocab) {
    from_tokenizer_json();
    from_config_json();
  }

  void set_special(const std::string& type, const json& id) {
    if (!id.is_number_integer()) return;
    const int64_t v = id.get<int64_t>();
    if (v < 0)
      fail(ErrorKind::Model, dir_ + ": special token " + type + " has id " + std::to_string(v));
    if (n_vocab_ > 0 && v >= n_vocab_) return;  // out of the vocabulary: skipped
    for (const auto& [t, _] : ids_)
      if (t == type) return;
    ids_.emplace_back(type, v);
  }

  int64_t added_id(const std::string& content) const {
    for (const json& a : added_)
      if (a.is_object() && str_or(a, "content") == content && a.contains("id") &&
          a["id"].is_number_integer())
        return a["id"].get<int64_t>();
    return -1;
  }

  GgufKeyValues keys() const {
    GgufKeyValues out;
    if (!merges_.empty()) {
      GgufArray a;
      a.elem = GgufType::String;
      a.strings = merges_;
      out.emplace_back("tokenizer.ggml.merges", gguf_array(std::move(a)));
    }
    for (const auto& [type, id] : ids_)
      if (const char* k = id_key(type)) out.emplace_back(k, gguf_int(GgufType::U32, id));
    for (const auto& [type, on] : add_)
      if (const char* k = add_key(type)) out.emplace_back(k, gguf_int(GgufType::Bool, on ? 1 : 0));
    add_chat_template(out);
    if (lowercase_)
      out.emplace_back("tokenizer.ggml.normalizer.lowercase",
                       gguf_int(GgufType::Bool, *lowercase_ ? 1 : 0));
    if (strip_accents_)
      out.emplace_back("tokenizer.ggml.normalizer.strip_accents",
                       gguf_int(GgufType::Bool, *strip_accents_ ? 1 : 0));
    return out;
  }

 private:
  void set_add(const std::string& type, bool on, bool only_if_unset) {
    for (auto& [t, v] : add_)
      if (t == type) {
        if (!only_if_unset) v = on;
        return;
      }
    add_.emplace_back(type, on);
  }

  void read_merges(const json& tok) {
    const json* m = tok.contains("model") ? &tok["model"] : nullptr;
    if (m == nullptr || !m->contains("merges") || !(*m)["merges"].is_array()) return;
    for (const json& x : (*m)["merges"]) {
      if (x.is_string()) {
        merges_.push_back(x.get<std::string>());
      } else if (x.is_array() && x.size() == 2 && x[0].is_string() && x[1].is_string()) {
        // Pairs (transformers >= 4.45) joined by a space, a space inside a part written U+0120.
        std::string s;
        for (int p = 0; p < 2; ++p) {
          if (p) s += ' ';
          for (char c : x[p].get<std::string>())
            s += c == ' ' ? std::string("\xC4\xA0") : std::string(1, c);
        }
        merges_.push_back(std::move(s));
      } else {
        fail(ErrorKind::Model, dir_ + "/tokenizer.json: merges in an unknown format");
      }
    }
  }

  void read_normalizer(const json& n) {
    const std::string type = str_or(n, "type");
    if (type == "Lowercase") lowercase_ = true;
    if (type == "StripAccents") strip_accents_ = true;
    if (type == "BertNormalizer") {
      if (n.contains("lowercase") && n["lowercase"].is_boolean())
        lowercase_ = n["lowercase"].get<bool>();
      if (n.contains("strip_accents") && n["strip_accents"].is_boolean())
        strip_accents_ = n["strip_accents"].get<bool>();
    }
    if (type == "Sequence" && n.contains("normalizers"))
      for (const json& x : n["normalizers"]) read_normalizer(x);
  }

  // The post-processor's template: which specials the tokenizer puts around a sequence.
  void read_template(const json& p, json& cfg, bool has_cfg) {
    const json single = p.value("single", json::array()), pair = p.value("pair", json::array());
    std::string first, last;
    if (single.size() > 1) {
      first = special_token_id(single.front());
      if (!first.empty()) {
        if (!has_cfg) {
          bos_ = first;
        } else if (first != bos_ && first != cls_) {
          if (bos_.empty()) cfg["bos_token"] = bos_ = first;
          if (cls_.empty()) cfg["cls_token"] = cls_ = first;
        }
        set_add("bos", first == bos_ || first == cls_, false);
      }
      last = special_token_id(single.back());
      if (!last.empty()) {
        if (!has_cfg) {
          eos_ = last;
        } else if (last != eos_) {
          if (!has_type("eot")) {
            types_.push_back("eot");
            cfg["eot_token"] = eos_;
          } else if (!has_type("eom")) {
            types_.push_back("eom");
            cfg["eom_token"] = eos_;
          }
          cfg["eos_token"] = eos_ = last;
        }
        set_add("eos", last == eos_, false);
      }
    }
    if (pair.empty()) return;
    size_t start = !first.empty() && special_token_id(pair.front()) == first ? 1 : 0;
    size_t stop =
        !last.empty() && special_token_id(pair.back()) == last ? pair.size() - 1 : pair.size();
    if (start >= stop) return;
    const json mid(pair.begin() + static_cast<std::ptrdiff_t>(start),
                   pair.begin() + static_cast<std::ptrdiff_t>(stop));
    if (sequence_id(mid.front()) != "A" || sequence_id(mid.back()) != "B" || mid.size() < 3) return;
    bool add_sep = false;
    const std::string e1 = special_token_id(mid[1]);
    if (!e1.empty() && (e1 == sep_ || e1 == eos_) && last.empty()) add_sep = true;
    if (mid.size() == 4) {
      const std::string e2 = special_token_id(mid[2]);
      if (!e2.empty() && (e2 == sep_ || e2 == eos_)) add_sep = true;
    }
    set_add("sep", add_sep, false);
    if (add_sep && sep_.empty() && has_cfg) cfg["sep_token"] = eos_;
  }

  bool has_type(const char* t) const {
    for (const std::string& x : types_)
      if (x == t) return true;
    return false;
  }

  void from_tokenizer_json() {
    const std::optional<json> tok = read_json(dir_ + "/tokenizer.json");
    if (tok) {
      if (load_merges_) read_merges(*tok);
      if (tok->contains("normalizer") && (*tok)["normalizer"].is_object())
        read_normalizer((*tok)["normalizer"]);
      if (tok->contains("added_tokens") && (*tok)["added_tokens"].is_array())
        added_ = (*tok)["added_tokens"];
    }
    std::optional<json> cfg = read_json(dir_ + "/tokenizer_config.json");
    const bool has_cfg = cfg && cfg->is_object() && !cfg->empty();
    if (!has_cfg) cfg = json::object();
    if (tok) {
      bos_ = str_or(*cfg, "bos_token"), cls_ = str_or(*cfg, "cls_token");
      eos_ = str_or(*cfg, "eos_token"), sep_ = str_or(*cfg, "sep_token");
      if (bos_.empty() && !cls_.empty() && has_cfg) (*cfg)["bos_token"] = bos_ = cls_;
      if (eos_.empty() && !sep_.empty() && has_cfg) (*cfg)["eos_token"] = eos_ = sep_;
      const json post = tok->value("post_processor", json());
      if (post.is_object()) {
        const json procs = post.contains("processors") ? post["processors"] : json::array({post});
        for (const json& p : procs) {
          const std::string type = str_or(p, "type");
          if (type == "ByteLevel") {
            set_add("bos", false, true);
            set_add("eos", false, true);
          } else if (type == "RobertaProcessing") {
            set_add("bos", true, false);
            set_add("eos", true, false);
            set_add("sep", true, false);
            if (cls_.empty() && has_cfg)
              (*cfg)["cls_token"] = cls_ =
                  p.contains("cls") ? p["cls"][0].get<std::string>() : bos_;
            if (sep_.empty() && has_cfg)
              (*cfg)["sep_token"] = sep_ =
                  p.contains("sep") ? p["sep"][0].get<std::string>() : eos_;
          } else if (type == "TemplateProcessing") {
            read_template(p, *cfg, has_cfg);
          }
        }
      }
    }
    if (!has_cfg) return;
    read_chat_template(*cfg);
    for (const std::string& type : types_) {
      const json add = cfg->value("add_" + type + "_token", json());
      if (add.is_boolean()) set_add(type, add.get<bool>(), true);
      const json entry = cfg->value(type + "_token", json());
      std::string content;
      if (entry.is_string()) content = entry.get<std::string>();
      if (entry.is_object()) content = str_or(entry, "content");
      if (content.empty() && !entry.is_string()) continue;
      const int64_t id = added_id(content);
      if (id >= 0) set_special(type, id);
    }
  }

  void read_chat_template(const json& cfg) {
    json alt;
    const std::string jinja = dir_ + "/chat_template.jinja";
    if (fs::is_regular_file(jinja)) {
      alt = read_text(jinja);
      std::vector<fs::path> more;
      if (fs::is_directory(dir_ + "/additional_chat_templates"))
        for (const auto& e : fs::directory_iterator(dir_ + "/additional_chat_templates"))
          if (e.path().extension() == ".jinja") more.push_back(e.path());
      if (!more.empty()) {
        json list = json::array({json{{"name", "default"}, {"template", alt}}});
        for (const fs::path& p : more)
          list.push_back(json{{"name", p.stem().string()}, {"template", read_text(p.string())}});
        alt = list;
      }
    } else if (const auto j = read_json(dir_ + "/chat_template.json"); j && j->is_object()) {
      alt = j->value("chat_template", json());
    }
    const json t = cfg.contains("chat_template") ? cfg["chat_template"] : alt;
    if (t.is_string() || t.is_array()) template_ = t;
  }

  void add_chat_template(GgufKeyValues& out) const {
    if (template_.is_string()) {
      out.emplace_back("tokenizer.chat_template", gguf_string(template_.get<std::string>()));
      return;
    }
    if (!template_.is_array()) return;
    std::string deflt;
    GgufArray names;
    names.elem = GgufType::String;
    for (const json& c : template_) {
      if (!c.is_object() || !c.contains("template") || !c["template"].is_string()) continue;
      std::string name = str_or(c, "name");
      for (char& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      if (name.empty()) continue;
      if (name == "default") {
        deflt = c["template"].get<std::string>();
      } else {
        names.strings.push_back(name);
        out.emplace_back("tokenizer.chat_template." + name,
                         gguf_string(c["template"].get<std::string>()));
      }
    }
    if (!names.strings.empty())
      out.emplace_back("tokenizer.chat_templates", gguf_array(std::move(names)));
    if (!deflt.empty()) out.emplace_back("tokenizer.chat_template", gguf_string(deflt));
  }

  void from_config_json() {
    const std::optional<json> cfg = read_json(dir_ + "/config.json");
    if (!cfg || !cfg->is_object()) return;
    for (const std::string& type : types_) {
      json id = cfg->value(type + "_token_id", json());
      if (id.is_null() && cfg->contains("text_config") && (*cfg)["text_config"].is_object())
        id = (*cfg)["text_config"].value(type + "_token_id", json());
      set_special(type, id);
    }
  }

  std::string dir_;
  bool load_merges_;
  int64_t n_vocab_;
  std::vector<std::string> types_ = {"bos", "eos", "unk", "sep", "pad", "cls", "mask"};
  std::vector<std::string> merges_;
  json added_ = json::array();
  std::string bos_, cls_, eos_, sep_;
  std::vector<std::pair<std::string, int64_t>> ids_;
  std::vector<std::pair<std::string, bool>> add_;
  json template_;
  std::optional<bool> lowercase_, strip_accents_;
};

}  // namespace

GgufKeyValues special_vocab_keys(const std::string& dir, bool load_merges, int64_t n_vocab,
                                 const std::vector<std::pair<std::string, std::string>>& extra) {
  SpecialVocab v(dir, load_merges, n_vocab);
  for (const auto& [type, text] : extra) {
    const int64_t id = v.added_id(text);
    if (id < 0)
      fail(ErrorKind::Model, dir + "/tokenizer.json: no added token '" + text + "' (the " + type +
                                 " token of this model class)");
    v.set_special(type, id);
  }
  return v.keys();
}

}  // namespace ts
