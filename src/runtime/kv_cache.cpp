#include "runtime/kv_cache.h"

#include "core/checked.h"
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

KvCache::~KvCache() {
  for (KvView& kv : layers_) {
    backend_.free(kv.k);
    backend_.free(kv.v);
  }
}

}  // namespace ts
