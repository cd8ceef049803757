#include "model/model_source.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "model/family.h"

namespace ts {

int64_t TensorRef::rows() const {
  int64_t r = 1;
  for (size_t d = 1; d < dims.size(); ++d) r *= static_cast<int64_t>(dims[d]);
  return r;
}

std::string TensorRef::shape_string() const {
  std::string s = "[";
  for (size_t d = 0; d < dims.size(); ++d) s += (d ? ", " : "") + std::to_string(dims[d]);
  return s + "]";
}

ModelSource::~ModelSource() = default;

std::unique_ptr<ModelSource> ModelSource::open(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(ErrorKind::Model, path + ": no such file or directory");
  std::unique_ptr<ModelSource> s(new ModelSource());
  s->path_ = path;
  if (S_ISDIR(st.st_mode)) {
    s->kind_ = SourceKind::HfDir;
    s->hf_ = HfDirectory::open(path);
    s->find_text_decoder();
  } else {
    s->kind_ = SourceKind::Gguf;
    s->gguf_ = GgufFile::open(path);
  }
  return s;
}

void ModelSource::find_text_decoder() {
  const nlohmann::json& c = hf_->config();
  const std::string arch = architecture();
  // A decoder saved without its LM head's wrapper (sentence-transformers saves Qwen3-Embedding
  // from Qwen3Model: "embed_tokens.weight", "layers.0. ...") keeps its names without "model.".
  if (hf_->find("model.embed_tokens.weight").tensor == nullptr &&
      hf_->find("embed_tokens.weight").tensor != nullptr) {
    bare_decoder_ = true;
    return;
  }
  auto text = c.find("text_config");
  if (!is_multimodal_class(arch) || text == c.end() || !text->is_object()) return;
  text_root_ = "text_config";
  for (const char* prefix : {"model.language_model.", "language_model.model."})
    if (hf_->find(std::string(prefix) + "embed_tokens.weight").tensor != nullptr) {
      text_prefix_ = prefix;
      return;
    }
  fail(ErrorKind::Model, path_ +
                             ": a multimodal checkpoint without its text decoder's embeddings "
                             "(model.language_model.embed_tokens.weight)");
}

std::optional<TensorRef> ModelSource::find(std::string_view name) const {
  TensorRef r;
  if (hf_ && (bare_decoder_ || !text_prefix_.empty()) && name.substr(0, 6) == "model.") {
    std::string mapped = text_prefix_;
    mapped += name.substr(6);
    const auto found = hf_->find(mapped);
    if (found.tensor != nullptr) {
      const SafetensorsTensor& t = *found.tensor;
      return TensorRef{t.name, t.dtype, t.dims, &found.file->file(), t.offset, t.nbytes};
    }
  }
  if (gguf_) {
    const GgufTensor* t = gguf_->tensor(name);
    if (t == nullptr) return std::nullopt;
    r = {t->name, t->dtype, t->dims, &gguf_->file(t->part), t->offset, t->nbytes};
  } else {
    const auto found = hf_->find(name);
    if (found.tensor == nullptr) return std::nullopt;
    const SafetensorsTensor& t = *found.tensor;
    r = {t.name, t.dtype, t.dims, &found.file->file(), t.offset, t.nbytes};
  }
  return r;
}

std::vector<TensorRef> ModelSource::all_tensors() const {
  std::vector<TensorRef> out;
  if (gguf_) {
    for (const GgufTensor& t : gguf_->tensors())
      out.push_back({t.name, t.dtype, t.dims, &gguf_->file(t.part), t.offset, t.nbytes});
  } else {
    for (const auto& shard : hf_->shards())
      for (const SafetensorsTensor& t : shard->tensors())
        out.push_back({t.name, t.dtype, t.dims, &shard->file(), t.offset, t.nbytes});
  }
  return out;
}

std::string ModelSource::architecture() const {
  if (gguf_) {
    auto a = gguf_->get_string("general.architecture");
    if (!a) fail(ErrorKind::Model, path_ + ": missing metadata 'general.architecture'");
    return *a;
  }
  const nlohmann::json& c = hf_->config();
  auto it = c.find("architectures");
  if (it == c.end() || !it->is_array() || it->empty() || !(*it)[0].is_string())
    fail(ErrorKind::Model,
         path_ + "/config.json: missing 'architectures' (a list naming the model class)");
  return (*it)[0].get<std::string>();
}

}  // namespace ts
