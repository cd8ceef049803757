#include "server/access_log.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "server/api_response.h"
#include "server/route_support.h"

namespace ts::server {
namespace {

struct Record {
  std::chrono::steady_clock::time_point start;
  bool seen = false;
  std::string method, path;
  int status = 0;
  int64_t prompt = 0, generated = 0;
};

thread_local Record record;

// A client's text as sent could hold what a terminal would act on: control bytes become '?'.
std::string printable(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return s;
}

}  // namespace

LogFormat parse_log_format(const std::string& name) {
  if (name == "text") return LogFormat::Text;
  if (name == "json") return LogFormat::Json;
  if (name == "off") return LogFormat::Off;
  fail(ErrorKind::Usage, "--log-format must be text, json or off, got '" + name + "'");
}

void access_begin() {
  record = Record{};
  record.start = std::chrono::steady_clock::now();
}

void access_response(const std::string& method, const std::string& path, int status) {
  record.seen = true;
  record.method = method;
  record.path = path;
  record.status = status;
}

void access_usage(int64_t prompt_tokens, int64_t generated_tokens) {
  record.prompt += prompt_tokens;
  record.generated += generated_tokens;
}

std::string access_end(LogFormat format) {
  if (format == LogFormat::Off || !record.seen) return "";
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - record.start)
          .count();
  const std::string time = rfc3339(std::chrono::system_clock::now());
  if (format == LogFormat::Json) {
    const nlohmann::json j = {{"time", time},
                              {"method", record.method},
                              {"path", record.path},
                              {"status", record.status},
                              {"prompt_tokens", record.prompt},
                              {"generated_tokens", record.generated},
                              {"ms", static_cast<int64_t>(ms + 0.5)}};
    return dump(j) + "\n";
  }
  char tail[128];
  std::snprintf(tail, sizeof(tail), " %d prompt=%lld generated=%lld ms=%lld\n", record.status,
                static_cast<long long>(record.prompt), static_cast<long long>(record.generated),
                static_cast<long long>(ms + 0.5));
  return time + " " + printable(record.method) + " " + printable(record.path) + tail;
}

}  // namespace ts::server
