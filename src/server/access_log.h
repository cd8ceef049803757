// One line per request on stderr once its response is written: time, method, path, status,
// prompt and generated tokens, milliseconds from the connection's hand-over to the last byte.
// As text ("2025-01-02T03:04:05.123456789Z POST /v1/chat/completions 200 prompt=12
// generated=34 ms=56") or as one JSON object a line for log collectors. The record is the worker
// thread's: a connection is served start to end (streamed bodies included) on one worker.
// Refusals the connection gate writes itself (408, 413 from the head, 503 for load) reach no
// worker and are not logged here; /metrics counts the load.
#pragma once

#include <cstdint>
#include <string>

#include "server/job.h"

namespace ts::server {

enum class LogFormat { Off, Text, Json };
// "text", "json" or "off"; an Input error otherwise.
LogFormat parse_log_format(const std::string& name);

// On the worker thread, around one connection.
void access_begin();
// What httplib answered (its logger, after the response is written).
void access_response(const std::string& method, const std::string& path, int status);
// A generation of the request ended with this usage (each choice's; the prompt counted once per
// distinct prompt by the caller passing prompt 0 for the others).
void access_usage(int64_t prompt_tokens, int64_t generated_tokens);
// The line of the connection's request ("" when no request was parsed).
std::string access_end(LogFormat format);

}  // namespace ts::server
