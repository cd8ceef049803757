#include "backend/cuda/device_memory.h"

#include <mutex>
#include <unordered_map>

namespace ts::cuda {
namespace {

struct Ledger {
  std::mutex mu;
  std::unordered_map<void*, size_t> sizes;  // every live allocation
  uint64_t held = 0, peak = 0;
};

Ledger& ledger() {
  static Ledger l;
  return l;
}

}  // namespace

cudaError_t device_malloc(void** p, size_t bytes) {
  const cudaError_t e = cudaMalloc(p, bytes);
  if (e != cudaSuccess) return e;
  Ledger& l = ledger();
  const std::lock_guard<std::mutex> lock(l.mu);
  l.sizes[*p] = bytes;
  l.held += bytes;
  if (l.held > l.peak) l.peak = l.held;
  return e;
}

cudaError_t device_free(void* p) {
  if (p == nullptr) return cudaSuccess;
  {
    Ledger& l = ledger();
    const std::lock_guard<std::mutex> lock(l.mu);
    const auto it = l.sizes.find(p);
    if (it != l.sizes.end()) {
      l.held -= it->second;
      l.sizes.erase(it);
    }
  }
  return cudaFree(p);
}

uint64_t device_peak_bytes() {
  Ledger& l = ledger();
  const std::lock_guard<std::mutex> lock(l.mu);
  return l.peak;
}

}  // namespace ts::cuda
