#include "backend/cuda/device_buffer.h"

#include "backend/cuda/cuda_check.h"

namespace ts::cuda {

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) {
    cudaStreamSynchronize(stream_);
    cudaFree(data_);
  }
}

void* DeviceBuffer::get(size_t bytes, const char* what) {
  if (bytes <= capacity_) return data_;
  check(cudaStreamSynchronize(stream_), what);
  if (data_ != nullptr) check(cudaFree(data_), what);
  data_ = nullptr;
  capacity_ = 0;
  check(cudaMalloc(&data_, bytes), what);
  check(cudaMemsetAsync(data_, 0, bytes, stream_), what);
  capacity_ = bytes;
  ++generation_;
  return data_;
}

}  // namespace ts::cuda
