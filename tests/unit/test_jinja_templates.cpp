// The Jinja engine against Python's jinja2 on real chat templates: every template in
// tests/fixtures/chat_templates/ rendered for every conversation of expected.json must give the
// text jinja2 gave, byte for byte, or fail where jinja2 failed (with raise_exception's message
// when that is how it failed). expected.json is written by tools/gen_chat_template_renders.py.
#include <gtest/gtest.h>

#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "test_paths.h"
#include "text/jinja/json_value.h"
#include "text/jinja/template.h"

namespace ts::jinja {
namespace {

std::string read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string dir() {
  return test::fixtures_dir() + "/chat_templates";
}

// The instant expected.json's strftime_now rendered ("2026-01-15T09:30:00", local time).
std::time_t fixed_now(const std::string& iso) {
  std::tm tm{};
  tm.tm_isdst = -1;
  sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
         &tm.tm_min, &tm.tm_sec);
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return std::mktime(&tm);
}

// Where two texts first differ, with some context, for the failure message.
std::string first_difference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  return "at byte " + std::to_string(i) +
         "\n  jinja2: " + nlohmann::json(want.substr(from, 120)).dump() +
         "\n  ours:   " + nlohmann::json(got.substr(from, 120)).dump();
}

TEST(JinjaTemplates, RenderLikeJinja2) {
  const auto expected = nlohmann::ordered_json::parse(read(dir() + "/expected.json"));
  RenderOptions options;
  options.now = fixed_now(expected["now"].get<std::string>());
  int identical = 0;
  int total = 0;
  for (const auto& [file, renders] : expected["renders"].items()) {
    std::unique_ptr<Template> tmpl;
    try {
      tmpl = std::make_unique<Template>(read(dir() + "/" + file));
    } catch (const Error& e) {
      ADD_FAILURE() << file << ": " << e.what();
      total += static_cast<int>(renders.size());
      continue;
    }
    for (const auto& [conv, want] : renders.items()) {
      ++total;
      Dict context = from_json(expected["special_tokens"]).as_dict();
      const Value conversation = from_json(expected["conversations"][conv]);
      for (const auto& [k, v] : conversation.as_dict().entries) context.set(k, v);
      std::string got;
      std::string error;
      try {
        got = tmpl->render(context, options);
      } catch (const Error& e) {
        error = e.what();
      }
      if (want.contains("error")) {
        const std::string message = want["error"].get<std::string>();
        const std::string raised = "TemplateError: ";
        if (error.empty()) {
          ADD_FAILURE() << file << " / " << conv << ": jinja2 failed (" << message
                        << "), we rendered";
        } else if (message.rfind(raised, 0) == 0 &&
                   error.find(message.substr(raised.size())) == std::string::npos) {
          ADD_FAILURE() << file << " / " << conv << ": jinja2 raised '" << message
                        << "', we raised '" << error << "'";
        } else {
          ++identical;
        }
        continue;
      }
      if (!error.empty()) {
        ADD_FAILURE() << file << " / " << conv << ": " << error;
      } else if (got != want["text"].get<std::string>()) {
        ADD_FAILURE() << file << " / " << conv << ": differs "
                      << first_difference(want["text"].get<std::string>(), got);
      } else {
        ++identical;
      }
    }
  }
  std::cout << identical << " of " << total << " renders match jinja2\n";
  EXPECT_GT(total, 300);
}

}  // namespace
}  // namespace ts::jinja
