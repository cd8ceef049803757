#include "backend/backend.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "core/checked.h"
#include "core/error.h"

namespace ts {
namespace {

constexpr size_t kHostAlign = 64;

}  // namespace

void* Backend::alloc_host_pinned(size_t bytes) {
  const size_t rounded =
      checked_add(bytes, kHostAlign - 1, "host staging allocation") / kHostAlign * kHostAlign;
  void* p = std::aligned_alloc(kHostAlign, rounded == 0 ? kHostAlign : rounded);
  if (p == nullptr)
    fail(ErrorKind::Runtime,
         "out of memory allocating " + std::to_string(bytes) + " bytes of host staging memory");
  return p;
}

void Backend::free_host_pinned(void* p) {
  std::free(p);
}

uint64_t Backend::copy_to_device_async(void* dst, const void* src, size_t bytes) {
  to_device(dst, src, bytes);
  return 0;
}

void Backend::zero(float* x, int64_t n) {
  const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
  to_device(x, zeros.data(), zeros.size() * sizeof(float));
}

}  // namespace ts
