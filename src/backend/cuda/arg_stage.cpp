#include "backend/cuda/arg_stage.h"

#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/step_graph.h"

namespace ts::cuda {
namespace {

constexpr size_t kInitialBytes = size_t{256} << 10;

size_t round_up(size_t n) {
  return (n + ArgStage::kSlotAlign - 1) / ArgStage::kSlotAlign * ArgStage::kSlotAlign;
}

}  // namespace

ArgStage::~ArgStage() {
  if (device_ != nullptr || pinned_ != nullptr) cudaStreamSynchronize(stream_);
  if (device_ != nullptr) device_free(device_);
  if (pinned_ != nullptr) cudaFreeHost(pinned_);
}

void ArgStage::forget_recent() {
  for (Recent& r : recent_) r.valid = false;
}

size_t ArgStage::capacity_bound(size_t largest_put) {
  // reserve() grows to the larger of the slot, twice the old size and the first size.
  return std::max(kInitialBytes, 2 * round_up(largest_put));
}

void ArgStage::reserve(size_t bytes) {
  if (bytes <= capacity_) return;
  const size_t capacity = std::max({bytes, 2 * capacity_, kInitialBytes});
  check(cudaStreamSynchronize(stream_), "argument staging");
  if (device_ != nullptr) check(device_free(device_), "argument staging");
  if (pinned_ != nullptr) check(cudaFreeHost(pinned_), "argument staging");
  device_ = nullptr;
  pinned_ = nullptr;
  capacity_ = 0;
  void* device = nullptr;
  void* pinned = nullptr;
  check(device_malloc(&device, capacity), "argument staging (device)");
  device_ = static_cast<unsigned char*>(device);
  check(cudaMallocHost(&pinned, capacity), "argument staging (pinned host)");
  pinned_ = static_cast<unsigned char*>(pinned);
  capacity_ = capacity;
  used_ = 0;
  forget_recent();
}

const void* ArgStage::put(const void* host, size_t bytes) {
  put_bytes_ += round_up(std::max<size_t>(bytes, 1));
  if (recording_ != nullptr) return recording_->slot(host, bytes);
  for (const Recent& r : recent_)
    if (r.valid && r.bytes.size() == bytes && std::memcmp(r.bytes.data(), host, bytes) == 0)
      return device_ + r.offset;
  const size_t slot = round_up(std::max<size_t>(bytes, 1));
  reserve(slot);
  if (used_ + slot > capacity_) {
    check(cudaStreamSynchronize(stream_), "argument staging");
    used_ = 0;
    forget_recent();
  }
  std::memcpy(pinned_ + used_, host, bytes);
  check(cudaMemcpyAsync(device_ + used_, pinned_ + used_, bytes, cudaMemcpyHostToDevice, stream_),
        "argument upload");
  Recent& r = recent_[next_recent_];
  next_recent_ = (next_recent_ + 1) % recent_.size();
  r.bytes.assign(static_cast<const unsigned char*>(host),
                 static_cast<const unsigned char*>(host) + bytes);
  r.offset = used_;
  r.valid = true;
  const void* result = device_ + used_;
  used_ += slot;
  return result;
}

}  // namespace ts::cuda
