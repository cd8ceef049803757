#include "runtime/model_tokenizer.h"

#include "formats/gguf.h"
#include "model/model_spec.h"

namespace ts {

Tokenizer load_tokenizer(const ModelSource& source) {
  if (source.gguf() != nullptr) return Tokenizer::from_gguf(*source.gguf());
  return Tokenizer::from_hf_dir(source.path());
}

Tokenizer load_tokenizer(const ModelSpec& spec) {
  return load_tokenizer(*spec.source);
}

ChatTemplate model_chat_template(const ModelSpec& spec, const Tokenizer& tok,
                                 const std::string& explicit_name) {
  const std::string source = spec.source->gguf() != nullptr
                                 ? gguf_chat_template(*spec.source->gguf())
                                 : hf_chat_template(spec.source->path());
  const auto text = [&](int32_t id) { return id >= 0 ? tok.token_text(id) : std::string(); };
  return select_chat_template(explicit_name, source, family_name(spec.cfg.family),
                              spec.source->path(),
                              {text(tok.bos()), text(tok.eos()), tok.add_bos()});
}

}  // namespace ts
