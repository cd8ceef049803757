#include "backend/cuda/device_buffer.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/pdl.cuh"

namespace ts::cuda {

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) {
    cudaStreamSynchronize(stream_);
    device_free(data_);
  }
}

void* DeviceBuffer::get(size_t bytes, const char* what) {
  if (bytes <= capacity_) return data_;
  check(cudaStreamSynchronize(stream_), what);
  if (data_ != nullptr) check(device_free(data_), what);
  data_ = nullptr;
  capacity_ = 0;
  check(device_malloc(&data_, bytes), what);
  check(cudaMemsetAsync(data_, 0, bytes, stream_), what);
  note_launch();  // what the old buffer held is gone
  capacity_ = bytes;
  ++generation_;
  return data_;
}

}  // namespace ts::cuda
