// The embedding routes: OpenAI's POST /v1/embeddings and Ollama's POST /api/embed and (legacy)
// POST /api/embeddings. Inputs are read by embedding_inputs(), run through the scheduler as
// embedding jobs (at most --parallel of one request at a time, twice that for an encoder, so a
// large batch neither fills the queue nor waits behind it) and answered in the dialect's shape:
//   /v1/embeddings   {"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
//                    "model", "usage": {"prompt_tokens", "total_tokens"}}; encoding_format
//                    "base64" sends each vector as little-endian float32 bytes in base64
//   /api/embed       {"model", "embeddings": [[...]], "total_duration", "load_duration",
//                    "prompt_eval_count"}; `truncate` (default true) cuts inputs to the context
//   /api/embeddings  {"embedding": [...]} for its one `prompt`
// A model that declares no pooling is refused with a 400 saying so; `dimensions` other than the
// model's own size is a 400 (no file format declares the shorter sizes a model was trained for).
#pragma once

#include <httplib.h>

#include "server/route_support.h"

namespace ts::server {

void add_embedding_routes(httplib::Server& svr, const RouteContext& ctx);

}  // namespace ts::server
