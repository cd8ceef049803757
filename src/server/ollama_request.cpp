#include "server/ollama_request.h"

#include <map>
#include <set>
#include <string>

#include "core/error.h"
#include "server/json_fields.h"

namespace ts::server {
namespace {

using nlohmann::json;

// Ollama's defaults (api/types.go DefaultOptions) for what a request leaves out.
const json& ollama_defaults() {
  static const json d = {{"temperature", 0.8},
                         {"top_k", 40},
                         {"top_p", 0.9},
                         {"repeat_penalty", 1.1},
                         {"repeat_last_n", 64}};
  return d;
}

// Options that tune how Ollama loads a model (threads, GPU layers, memory mapping, batch): this
// server decides those at start (`serve` flags), so they are accepted and have no effect.
// num_ctx is one: each slot's context is the server's -c.
const std::set<std::string>& load_options() {
  static const std::set<std::string> s = {
      "numa",      "num_ctx",        "num_batch",  "num_gpu",    "main_gpu",
      "low_vram",  "f16_kv",         "logits_all", "vocab_only", "use_mmap",
      "use_mlock", "embedding_only", "num_thread", "num_keep",   "penalize_newline"};
  return s;
}

// Sampling options, by the OpenAI (or llama.cpp) field they become.
const std::map<std::string, std::string>& sampling_options() {
  static const std::map<std::string, std::string> m = {{"temperature", "temperature"},
                                                       {"top_k", "top_k"},
                                                       {"top_p", "top_p"},
                                                       {"min_p", "min_p"},
                                                       {"seed", "seed"},
                                                       {"stop", "stop"},
                                                       {"repeat_penalty", "repeat_penalty"},
                                                       {"repeat_last_n", "repeat_last_n"},
                                                       {"presence_penalty", "presence_penalty"},
                                                       {"frequency_penalty", "frequency_penalty"}};
  return m;
}

// Options whose only value here is the one that turns them off (other samplers).
const std::map<std::string, double>& off_options() {
  static const std::map<std::string, double> m = {{"mirostat", 0}, {"tfs_z", 1}, {"typical_p", 1}};
  return m;
}

// The Ollama name of an OpenAI field an error names.
std::string ollama_field(const std::string& openai) {
  static const std::map<std::string, std::string> m = {{"response_format", "format"},
                                                       {"json_schema", "format"},
                                                       {"max_tokens", "options.num_predict"},
                                                       {"chat_template_kwargs", "think"},
                                                       {"reasoning_effort", "think"}};
  if (const auto it = m.find(openai); it != m.end()) return it->second;
  if (sampling_options().count(openai) != 0) return "options." + openai;
  return openai;
}

// parse_api_request on the rewritten body, its errors naming the Ollama fields.
ApiRequest parse_rewritten(ApiKind kind, const json& openai) {
  try {
    return parse_api_request(kind, openai);
  } catch (const Error& e) {
    const std::string m = e.what();
    if (m.size() < 2 || m[0] != '\'') throw;
    const size_t close = m.find('\'', 1);
    if (close == std::string::npos) throw;
    const std::string field = m.substr(1, close - 1);
    const size_t cut = field.find_first_of(".[");
    const std::string head = field.substr(0, cut);
    const std::string rest = cut == std::string::npos ? "" : field.substr(cut);
    fail(ErrorKind::Input, "'" + ollama_field(head) + rest + "'" + m.substr(close + 1));
  }
}

void refuse_unknown(const json& body, const std::set<std::string>& known) {
  for (const auto& [name, value] : body.items())
    if (known.count(name) == 0) bad(name, "is not a field this server implements");
}

// "model" (required, as Ollama requires it), "options", "format", "think" into `out`.
void read_common(const json& body, json& out) {
  std::string model = string(body, "model");
  if (model.empty()) bad("model", "is required");
  // Ollama names a model NAME:TAG, and NAME alone means NAME:latest.
  constexpr std::string_view kLatest = ":latest";
  if (model.size() > kLatest.size() && model.ends_with(kLatest))
    model.resize(model.size() - kLatest.size());
  out["model"] = model;
  for (const auto& [k, v] : ollama_defaults().items()) out[k] = v;
  if (const json* opts = get(body, "options"); opts != nullptr) {
    if (!opts->is_object()) bad("options", "must be an object");
    for (const auto& [name, value] : opts->items()) {
      const std::string field = "options." + name;
      if (value.is_null() || load_options().count(name) != 0) continue;
      if (name == "num_predict") {
        if (!value.is_number_integer()) bad(field, "must be an integer");
        const int64_t n = value.get<int64_t>();
        // -1: no limit; -2: until the context is full. Both run to the end of the context here.
        if (n == -1 || n == -2) {
          out.erase("max_tokens");
        } else if (n >= 1) {
          out["max_tokens"] = value;
        } else {
          bad(field,
              "must be -1 (no limit), -2 (fill the context) or at least 1, got " + value.dump());
        }
        continue;
      }
      if (const auto off = off_options().find(name); off != off_options().end()) {
        if (!value.is_number()) bad(field, "must be a number");
        if (value.get<double>() != off->second)
          bad(field, "is not supported: only " + json(off->second).dump() + " (off) is accepted");
        continue;
      }
      const auto it = sampling_options().find(name);
      if (it == sampling_options().end()) bad(field, "is not an option this server implements");
      // Ollama's "no seed": -1 draws one.
      if (name == "seed" && value.is_number_integer() && value.get<int64_t>() < 0) {
        out.erase("seed");
        continue;
      }
      out[it->second] = value;
    }
  }
  if (const json* f = get(body, "format"); f != nullptr) {
    if (f->is_string() && f->get_ref<const std::string&>() == "json") {
      out["response_format"] = {{"type", "json_object"}};
    } else if (f->is_object()) {
      out["response_format"] = {{"type", "json_schema"},
                                {"json_schema", {{"name", "format"}, {"schema", *f}}}};
    } else if (!(f->is_string() && f->get_ref<const std::string&>().empty())) {
      bad("format", "must be \"json\" or a JSON Schema object");
    }
  }
  if (const json* t = get(body, "think"); t != nullptr) {
    if (t->is_boolean()) {
      out["chat_template_kwargs"] = {{"enable_thinking", t->get<bool>()}};
    } else if (t->is_string()) {
      out["reasoning_effort"] = *t;
    } else {
      bad("think", "must be true, false, or \"low\", \"medium\" or \"high\"");
    }
  }
}

bool read_stream(const json& body) {
  return boolean(body, "stream", true);
}

void refuse_images(const json& holder, const std::string& field) {
  const json* images = get(holder, "images");
  if (images != nullptr && !(images->is_array() && images->empty()))
    bad(field, "are not supported: this server's models read text only");
}

// Ollama's tool calls ({"function": {"name", "arguments": {...}}}) as OpenAI's.
json openai_tool_calls(const json& calls, const std::string& field) {
  if (!calls.is_array()) bad(field, "must be a list");
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& c = calls[i];
    const std::string f = field + "[" + std::to_string(i) + "]";
    const json* fn = c.is_object() ? get(c, "function") : nullptr;
    if (fn == nullptr || !fn->is_object()) bad(f + ".function", "must be an object");
    json call = {{"id", "call_" + std::to_string(i)}, {"type", "function"}, {"function", *fn}};
    if (const json* id = get(c, "id"); id != nullptr && id->is_string()) call["id"] = *id;
    out.push_back(std::move(call));
  }
  return out;
}

json openai_messages(const json& body) {
  const json* v = get(body, "messages");
  if (v == nullptr) bad("messages", "is required");
  if (!v->is_array() || v->empty()) bad("messages", "must be a non-empty list");
  json out = json::array();
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string field = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad(field, "must be an object");
    refuse_images(m, field + ".images");
    json msg = json::object();
    for (const auto& [name, value] : m.items()) {
      if (name == "role" || name == "content") {
        msg[name] = value;
      } else if (name == "thinking") {
        msg["reasoning_content"] = value;
      } else if (name == "tool_calls") {
        if (!value.is_null()) msg["tool_calls"] = openai_tool_calls(value, field + ".tool_calls");
      } else if (name == "tool_name") {
        msg["name"] = value;
      } else if (name != "images") {
        bad(field + "." + name, "is not a field this server implements");
      }
    }
    out.push_back(std::move(msg));
  }
  return out;
}

}  // namespace

OllamaRequest parse_ollama_chat(const json& body) {
  refuse_unknown(
      body, {"model", "messages", "tools", "format", "options", "stream", "keep_alive", "think"});
  OllamaRequest r;
  json out = json::object();
  read_common(body, out);
  out["messages"] = openai_messages(body);
  if (const json* tools = get(body, "tools"); tools != nullptr) out["tools"] = *tools;
  r.stream = read_stream(body);
  r.api = parse_rewritten(ApiKind::Chat, out);
  return r;
}

OllamaRequest parse_ollama_generate(const json& body, bool has_chat) {
  refuse_unknown(body, {"model", "prompt", "suffix", "system", "template", "context", "stream",
                        "raw", "format", "images", "options", "keep_alive", "think"});
  OllamaRequest r;
  json out = json::object();
  read_common(body, out);
  refuse_images(body, "images");
  if (!string(body, "suffix").empty())
    bad("suffix", "is not supported (no fill-in-the-middle): send the text before it as prompt");
  if (!string(body, "template").empty())
    bad("template", "is not supported: the server runs the model's own chat template");
  if (const json* c = get(body, "context"); c != nullptr && !(c->is_array() && c->empty()))
    bad("context", "is not supported: send the conversation to /api/chat instead");
  const std::string prompt = string(body, "prompt");
  const std::string system = string(body, "system");
  r.stream = read_stream(body);
  if (prompt.empty()) {
    r.load_only = true;
    r.api.model = out["model"].get<std::string>();
    return r;
  }
  if (has_chat && !boolean(body, "raw", false)) {
    json messages = json::array();
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
    messages.push_back({{"role", "user"}, {"content", prompt}});
    out["messages"] = std::move(messages);
    r.api = parse_rewritten(ApiKind::Chat, out);
  } else {
    // Raw: the prompt is the model's input as written (Ollama ignores "system" then too).
    if (out.contains("chat_template_kwargs") || out.contains("reasoning_effort"))
      bad("think", "needs the model's chat template: it cannot be combined with \"raw\"");
    out["prompt"] = prompt;
    // Ollama's num_predict absent means no limit; OpenAI's completions default to 16 tokens.
    if (!out.contains("max_tokens")) out["max_tokens"] = nullptr;
    r.api = parse_rewritten(ApiKind::Completion, out);
    if (!out["max_tokens"].is_number()) r.api.max_tokens = -1;
  }
  return r;
}

}  // namespace ts::server
