// Small host arguments (token ids, positions, row indices, scales) copied to the device for the
// kernels that read them. A pinned ring and a device ring of the same size: each argument takes
// the next slot, is copied asynchronously on the stream, and stays valid for every kernel queued
// after it; when the ring wraps, the stream is drained first so that no queued kernel still reads a
// slot being reused. Positions repeat across every layer of a token (rope, kv_store, attention),
// so an argument whose bytes equal one of the last few uploads reuses that slot instead.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <vector>

namespace ts::cuda {

class ArgTable;

class ArgStage {
 public:
  explicit ArgStage(cudaStream_t stream) : stream_(stream) {}
  ~ArgStage();
  ArgStage(const ArgStage&) = delete;
  ArgStage& operator=(const ArgStage&) = delete;

  // Every argument takes a slot of a multiple of this many bytes.
  static constexpr size_t kSlotAlign = 256;

  // Device copy of `bytes` bytes at `host`.
  const void* put(const void* host, size_t bytes);
  // The most device memory the rings take when no put() is larger than `largest_put` bytes.
  static size_t capacity_bound(size_t largest_put);

  // While a step is being recorded (CUDA graph capture), put() takes the recording's slot for
  // the argument instead and queues no copy: the recording copies its arguments before every
  // replay. nullptr ends the recording.
  void record_into(ArgTable* table) { recording_ = table; }
  bool recording() const { return recording_ != nullptr; }
  // Bytes of slots put() has handed out so far: an eager run's count sizes its recording.
  size_t put_bytes() const { return put_bytes_; }

 private:
  struct Recent {
    std::vector<unsigned char> bytes;
    size_t offset = 0;
    bool valid = false;
  };

  void reserve(size_t bytes);
  void forget_recent();

  cudaStream_t stream_;
  unsigned char* pinned_ = nullptr;
  unsigned char* device_ = nullptr;
  size_t capacity_ = 0;
  size_t used_ = 0;
  std::array<Recent, 4> recent_;
  size_t next_recent_ = 0;
  ArgTable* recording_ = nullptr;
  size_t put_bytes_ = 0;
};

}  // namespace ts::cuda
