// `turbospark convert --mmproj`: a multimodal HF directory's vision tower and projector as the
// mmproj GGUF (architecture "clip") that llama.cpp's convert_hf_to_gguf.py --mmproj writes: its
// clip.* keys and the tower's tensors under their v.* / mm.* names, for the towers the engine
// reads: Qwen3-VL's, Gemma 3's and Gemma 4's.
#pragma once

#include "model/convert_model.h"

namespace ts {

// The mmproj of `source` (an HF directory); `vocab` is left empty (an mmproj has no tokenizer).
// Unsupported: a class whose vision tower convert does not write, a tensor it cannot name.
ConvertedModel convert_hf_mmproj(const ModelSource& source);

}  // namespace ts
