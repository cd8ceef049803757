// What one model-file fuzz input does: a GGUF's bytes opened as a model (open_model_spec: the
// family's configuration reader, the layer pattern, every tensor of every layer checked), either
// refused with a one-line Model or Unsupported error (false) or accepted (true), in which case
// every tensor the layers will read lies inside the file. Shared by the libFuzzer target and the
// replay test.
#pragma once

#include <string>

#include "model/model_spec.h"
#include "parser_harness.h"

namespace ts::fuzz {

inline bool check_model(const std::string& path) {
  std::unique_ptr<ModelSpec> spec;
  try {
    spec = open_model_spec(path);
  } catch (const Error& e) {
    return refused(e);
  }
  const auto inside = [&](const TensorRef& t) {
    const uint64_t size = t.file->size();
    if (t.offset > size || t.nbytes > size - t.offset) violated("tensor '" + t.name + "' range");
  };
  inside(spec->token_embd);
  inside(spec->output);
  for (const LayerIndex& L : spec->layers) {
    for (const auto& t : L.tensors)
      if (t) inside(*t);
    for (const auto& expert : L.experts)
      for (const ExpertSlice& s : expert)
        if (s.offset > s.file->size() || s.nbytes > s.file->size() - s.offset)
          violated("expert slice range");
  }
  if (spec->cfg.layer_mixer.size() != spec->layers.size()) violated("layer pattern size");
  return true;
}

}  // namespace ts::fuzz
