// The formats of constrain/tool_format.h, one file each; tool_format.cpp chooses among them.
#pragma once

#include "constrain/tool_format.h"

namespace ts::tool_formats {

const ToolFormat& hermes();
const ToolFormat& qwen3_xml();
const ToolFormat& mistral();
const ToolFormat& mistral_nemo();
const ToolFormat& llama3();
const ToolFormat& deepseek_v3();
const ToolFormat& deepseek_v3_1();
const ToolFormat& harmony();

}  // namespace ts::tool_formats
