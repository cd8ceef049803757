// Reading pieces of model-written calls, shared by the formats' parsers. The text is untrusted:
// every function answers "not here" (npos, false) instead of throwing.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "constrain/tool_calls.h"

namespace ts::tool_text {

// The index just past the JSON object (or array) that opens at text[start], strings skipped;
// npos when it is not closed in the text.
size_t json_end(std::string_view text, size_t start);
// The compact text of `text` as a JSON object; false when it is not one (or nests too deep).
bool arguments_object(std::string_view text, std::string& compact);
// A function name as OpenAI allows it: 1 to 64 letters, digits, '_' or '-'.
bool valid_name(std::string_view name);
size_t skip_space(std::string_view text, size_t at);
// Adds {name, arguments} to `calls` when both read; the arguments are the JSON object that opens
// at or after `at` (after whitespace). Returns the index past the object, or npos.
size_t add_json_call(std::string_view name, std::string_view text, size_t at,
                     std::vector<ToolCall>& calls);

}  // namespace ts::tool_text

namespace ts::tool_text {

// The calls written as JSON objects {"name": ..., <args_key>: {...}} anywhere at the top level of
// `text` (markers between them hold no brace): Hermes, Llama 3, Mistral Nemo. The arguments may
// also be the JSON text of an object, as some fine-tunes write them.
std::vector<ToolCall> json_object_calls(std::string_view text, std::string_view args_key);

}  // namespace ts::tool_text
