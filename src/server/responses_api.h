// OpenAI's Responses API, which the current `openai` client and agent frameworks default to:
//   POST /v1/responses           create; whole, or streamed as typed server-sent events
//                                (response.created ... response.output_text.delta ...
//                                response.completed)
//   GET /v1/responses/ID         a stored response
//   DELETE /v1/responses/ID      forget it
// previous_response_id continues a stored conversation (server/response_store.h); function tools,
// structured output (text.format json_schema) and the model's thinking (a reasoning item; its
// summary too when reasoning.summary is asked for) go through the shared generation path
// (server/generation.h). Errors are OpenAI's {"error": {...}} with the field as "param".
#pragma once

#include <httplib.h>

#include "server/response_store.h"
#include "server/route_support.h"

namespace ts::server {

void add_responses_routes(httplib::Server& svr, const RouteContext& ctx, ResponseStore& store);

}  // namespace ts::server
