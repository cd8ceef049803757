// Reading a request body's fields, the same way for every route: an absent or null field takes
// its default (OpenAI's rule), a field of the wrong type or outside its range is an Input error
// naming it ("'temperature' must be between 0 and 2, got 5").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace ts::server {

[[noreturn]] void bad(const std::string& field, const std::string& what);

// The field, or nullptr when it is absent or null.
const nlohmann::json* get(const nlohmann::json& body, const char* name);

double number(const nlohmann::json& body, const char* name, double lo, double hi, double def);
int64_t integer(const nlohmann::json& body, const char* name, int64_t lo, int64_t hi, int64_t def);
bool boolean(const nlohmann::json& body, const char* name, bool def);
std::string string(const nlohmann::json& body, const char* name);  // "" when absent

}  // namespace ts::server
