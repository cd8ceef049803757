#include "runtime/kv_cache.h"

#include <string>

#include "core/checked.h"
#include "core/error.h"
#include "runtime/engine.h"

namespace ts {

KvCache::KvCache(Engine& engine, int64_t ctx) : backend_(engine.backend()), ctx_(ctx) {
  const ArchConfig& c = engine.cfg();
  const DType type = engine.options().kv_type;
  const int64_t width = c.n_head_kv * c.head_dim;
  const uint64_t row = row_bytes(type, static_cast<uint64_t>(width), "KV cache row");
  const uint64_t layer_bytes = checked_mul(row, static_cast<uint64_t>(ctx), "KV cache");
  layers_.resize(static_cast<size_t>(c.n_layer));
  for (KvView& kv : layers_) {
    kv = KvView{type,
                ctx,
                width,
                static_cast<size_t>(row),
                backend_.alloc(layer_bytes),
                backend_.alloc(layer_bytes)};
    bytes_ += 2 * layer_bytes;
  }
}

void KvCache::copy_rows_from(const KvCache& from, int64_t rows) {
  if (rows < 0 || rows > from.n_past || rows > ctx_ || from.layers_.size() != layers_.size())
    fail(ErrorKind::Runtime, "KV cache: cannot copy " + std::to_string(rows) +
                                 " rows of a cache "
                                 "holding " +
                                 std::to_string(from.n_past));
  for (size_t l = 0; l < layers_.size(); ++l) {
    const size_t bytes = static_cast<size_t>(rows) * layers_[l].row_bytes;
    backend_.copy(layers_[l].k, from.layers_[l].k, bytes);
    backend_.copy(layers_[l].v, from.layers_[l].v, bytes);
  }
  n_past = rows;
}

KvCache::~KvCache() {
  for (KvView& kv : layers_) {
    backend_.free(kv.k);
    backend_.free(kv.v);
  }
}

}  // namespace ts
