// The limits that keep one request from taking the server down, without a socket: JSON nesting
// refused before a parser builds anything (so no recursive copy, dump or schema walk can overflow
// the stack), request heads judged as they arrive (request line, header count and size, declared
// body size, the control lane), and the refusals the connection gate writes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/json_nesting.h"
#include "server/api_request.h"
#include "server/http_errors.h"
#include "server/request_head.h"
#include "server/tool_request.h"

namespace ts::server {
namespace {

std::string nested(size_t depth, const std::string& leaf = "1") {
  return std::string(depth, '[') + leaf + std::string(depth, ']');
}

TEST(JsonNesting, CountsBracketsOutsideStrings) {
  EXPECT_EQ(json_nesting("1"), 0u);
  EXPECT_EQ(json_nesting(R"({"a": [1, {"b": []}]})"), 4u);
  EXPECT_EQ(json_nesting(R"(["[[[[", "\"[[[", {}])"), 2u);
  EXPECT_EQ(json_nesting(nested(kMaxJsonNesting)), kMaxJsonNesting);
  // The scan stops one level past the limit, whatever follows.
  EXPECT_EQ(json_nesting(nested(100000)), kMaxJsonNesting + 1);
}

TEST(JsonNesting, BoundedParseRefusesDeepTextBeforeParsing) {
  EXPECT_EQ(parse_json_bounded(nested(kMaxJsonNesting), "x").dump().size(),
            2 * kMaxJsonNesting + 1);
  try {
    parse_json_bounded(nested(kMaxJsonNesting + 1), "the request body");
    FAIL() << "nesting past the limit was parsed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Input);
    EXPECT_STREQ(e.what(), "the request body nests arrays and objects deeper than 64 levels");
  }
  try {
    parse_json_bounded("{\"a\": ", "the request body", ErrorKind::Model);
    FAIL() << "malformed JSON was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Model);
    EXPECT_STREQ(e.what(), "the request body is not valid JSON");
  }
  EXPECT_TRUE(parse_json_or_discarded(nested(200000)).is_discarded());
  EXPECT_TRUE(parse_json_or_discarded("[1,").is_discarded());
  EXPECT_EQ(parse_json_or_discarded("[[2]]")[0][0], 2);
}

// Tool-call arguments arrive as JSON text inside a string, where the body's bound does not see
// them: they are parsed with the bound themselves.
TEST(JsonNesting, ToolCallArgumentsTextIsBounded) {
  const nlohmann::json calls = nlohmann::json::parse(
      R"([{"type": "function", "function": {"name": "f", "arguments": ""}}])");
  nlohmann::json deep = calls;
  deep[0]["function"]["arguments"] = "{\"a\": " + nested(100000) + "}";
  EXPECT_THROW(read_tool_calls(deep, "tool_calls"), Error);
  nlohmann::json fine = calls;
  fine[0]["function"]["arguments"] = "{\"a\": " + nested(10) + "}";
  EXPECT_NE(read_tool_calls(fine, "tool_calls").dump().find("[[[[[[[[[[1]]]]]]]]]]"),
            std::string::npos);
}

constexpr const char* kHealth = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";

TEST(RequestHead, WaitsForTheBlankLine) {
  const HttpLimits limits;
  EXPECT_EQ(check_head("GET /health HTTP/1.1\r\nHost: x\r\n", limits).state, HeadState::Incomplete);
  const HeadVerdict v = check_head(kHealth, limits);
  EXPECT_EQ(v.state, HeadState::Complete);
  EXPECT_EQ(v.head_bytes, std::string(kHealth).size());
  EXPECT_TRUE(v.control);
  // Bare LF line ends, as the parser after this accepts them.
  EXPECT_EQ(check_head("GET /metrics?x=1 HTTP/1.1\nHost: x\n\n", limits).state,
            HeadState::Complete);
  EXPECT_TRUE(check_head("GET /metrics?x=1 HTTP/1.1\nHost: x\n\n", limits).control);
}

TEST(RequestHead, OnlyBodilessStatusReadsTakeTheControlLane) {
  const HttpLimits limits;
  const std::string post = "POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}";
  EXPECT_FALSE(check_head(post, limits).control);
  EXPECT_EQ(check_head(post, limits).head_bytes, post.size() - 2);
  EXPECT_FALSE(check_head("GET /health HTTP/1.1\r\nContent-Length: 5\r\n\r\n", limits).control);
  EXPECT_FALSE(check_head("GET /v1/models HTTP/1.1\r\n\r\n", limits).control);
}

TEST(RequestHead, RefusesWhatBreaksALimitAsSoonAsItShows) {
  HttpLimits limits;
  limits.max_headers = 10;
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 11; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  // Refused before the head is complete: the count alone is enough.
  const HeadVerdict count = check_head(many, limits);
  EXPECT_EQ(count.state, HeadState::Refused);
  EXPECT_EQ(count.status, 431);
  EXPECT_EQ(count.message, "the request has more than 10 headers");

  EXPECT_EQ(check_head("GET /" + std::string(9000, 'a'), limits).status, 414);
  EXPECT_EQ(check_head("GET / HTTP/1.1\r\nX: " + std::string(40000, 'a'), limits).status, 431);
  EXPECT_EQ(check_head("POST / HTTP/1.1\r\nContent-Length: 4194305\r\n\r\n", limits).status, 413);
  EXPECT_EQ(check_head("POST / HTTP/1.1\r\nContent-Length: 4194304\r\n\r\n", limits).state,
            HeadState::Complete);
  EXPECT_EQ(
      check_head("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", limits).status,
      400);
  EXPECT_EQ(check_head("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", limits).status, 400);
  EXPECT_EQ(check_head("POST / HTTP/1.1\r\ncontent-length: 1\r\nContent-Length: 2\r\n\r\n", limits)
                .status,
            400);
  EXPECT_EQ(check_head("POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                       limits)
                .status,
            400);
  EXPECT_EQ(check_head("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", limits).state,
            HeadState::Complete);
}

// What the gate writes itself: a whole HTTP response whose length is its body's, with the OpenAI
// error shape, and Retry-After only where retrying helps.
TEST(HttpErrors, RefusalIsAWholeResponse) {
  const std::string busy = refusal_text(503, "the server is busy");
  const size_t blank = busy.find("\r\n\r\n");
  ASSERT_NE(blank, std::string::npos);
  const std::string head = busy.substr(0, blank), body = busy.substr(blank + 4);
  EXPECT_EQ(head.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0), 0u);
  EXPECT_NE(head.find("\r\nContent-Length: " + std::to_string(body.size())), std::string::npos);
  EXPECT_NE(head.find("\r\nConnection: close"), std::string::npos);
  EXPECT_NE(head.find("\r\nRetry-After: 1"), std::string::npos);
  const auto j = nlohmann::json::parse(body);
  EXPECT_EQ(j["error"]["message"], "the server is busy");
  EXPECT_EQ(j["error"]["type"], "server_error");
  EXPECT_EQ(j["error"]["code"], "server_busy");

  const std::string big = refusal_text(431, "the request has more than 100 headers");
  EXPECT_EQ(big.rfind("HTTP/1.1 431 Request Header Fields Too Large\r\n", 0), 0u);
  EXPECT_EQ(big.find("Retry-After"), std::string::npos);
  EXPECT_NE(big.find("\"headers_too_large\""), std::string::npos);
}

}  // namespace
}  // namespace ts::server
