// A device scratch buffer that grows on demand (never shrinks) and is freed with its owner. Work
// queued on `stream` may still read the old buffer when it grows, so growing waits for the stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ts::cuda {

class DeviceBuffer {
 public:
  explicit DeviceBuffer(cudaStream_t stream) : stream_(stream) {}
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // At least `bytes` of device memory, zeroed when (re)allocated; `what` names the buffer in an
  // allocation failure.
  void* get(size_t bytes, const char* what);
  size_t capacity() const { return capacity_; }
  // Counts the reallocations: a recorded graph that names the buffer is stale once it changes.
  uint64_t generation() const { return generation_; }

 private:
  cudaStream_t stream_;
  void* data_ = nullptr;
  size_t capacity_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace ts::cuda
