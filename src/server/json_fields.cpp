#include "server/json_fields.h"

#include "core/error.h"

namespace ts::server {

using nlohmann::json;

[[noreturn]] void bad(const std::string& field, const std::string& what) {
  fail(ErrorKind::Input, "'" + field + "' " + what);
}

const json* get(const json& body, const char* name) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

double number(const json& body, const char* name, double lo, double hi, double def) {
  const json* v = get(body, name);
  if (v == nullptr) return def;
  if (!v->is_number()) bad(name, "must be a number");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi))
    bad(name,
        "must be between " + json(lo).dump() + " and " + json(hi).dump() + ", got " + v->dump());
  return x;
}

int64_t integer(const json& body, const char* name, int64_t lo, int64_t hi, int64_t def) {
  const json* v = get(body, name);
  if (v == nullptr) return def;
  if (!v->is_number_integer()) bad(name, "must be an integer");
  // Read as unsigned first: a value past int64 must not wrap into the range.
  const bool above = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi);
  const int64_t x = above ? hi : v->get<int64_t>();
  if (above || x < lo)
    bad(name, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " +
                  v->dump());
  return x;
}

bool boolean(const json& body, const char* name, bool def) {
  const json* v = get(body, name);
  if (v == nullptr) return def;
  if (!v->is_boolean()) bad(name, "must be true or false");
  return v->get<bool>();
}

std::string string(const json& body, const char* name) {
  const json* v = get(body, name);
  if (v == nullptr) return {};
  if (!v->is_string()) bad(name, "must be a string");
  return v->get<std::string>();
}

}  // namespace ts::server
