#include "backend/cuda/step_graph.h"

#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_memory.h"
#include "core/error.h"

namespace ts::cuda {
namespace {

// Slots are aligned for any argument type the kernels read (int32, float).
constexpr size_t kSlotAlign = 16;

}  // namespace

ArgTable::ArgTable(size_t capacity) : capacity_(capacity) {
  void* pinned = nullptr;
  void* device = nullptr;
  check(cudaMallocHost(&pinned, capacity_), "recorded arguments (pinned host)");
  pinned_ = static_cast<unsigned char*>(pinned);
  check(device_malloc(&device, capacity_), "recorded arguments (device)");
  device_ = static_cast<unsigned char*>(device);
  check(cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming), "recorded arguments");
}

ArgTable::~ArgTable() {
  if (uploaded_ != nullptr) {
    cudaEventSynchronize(uploaded_);
    cudaEventDestroy(uploaded_);
  }
  if (device_ != nullptr) device_free(device_);
  if (pinned_ != nullptr) cudaFreeHost(pinned_);
}

const void* ArgTable::slot(const void* host, size_t bytes) {
  for (const Entry& e : entries_)
    if (e.host == host && e.bytes == bytes) return device_ + e.offset;
  const size_t size = (bytes + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
  if (used_ + size > capacity_)
    fail(ErrorKind::Runtime, "recorded step: arguments exceed the " + std::to_string(capacity_) +
                                 " bytes its eager run used");
  entries_.push_back(Entry{host, bytes, used_});
  used_ += size;
  return device_ + entries_.back().offset;
}

void ArgTable::upload(cudaStream_t stream) {
  if (used_ == 0) return;
  // The previous replay's copy may still be reading the pinned buffer.
  check(cudaEventSynchronize(uploaded_), "recorded arguments");
  for (const Entry& e : entries_) std::memcpy(pinned_ + e.offset, e.host, e.bytes);
  check(cudaMemcpyAsync(device_, pinned_, used_, cudaMemcpyHostToDevice, stream),
        "recorded arguments");
  check(cudaEventRecord(uploaded_, stream), "recorded arguments");
}

size_t StepGraph::table_bytes(size_t arg_bytes) {
  return arg_bytes + kSlotAlign;
}

StepGraph::StepGraph(cudaStream_t stream, size_t arg_bytes)
    : stream_(stream), args_(table_bytes(arg_bytes)) {}

StepGraph::~StepGraph() {
  if (exec_ != nullptr) {
    cudaStreamSynchronize(stream_);
    cudaGraphExecDestroy(exec_);
  }
}

bool StepGraph::capture(const std::function<void()>& ops, std::string& why) {
  check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "graph capture");
  try {
    ops();
  } catch (const Error& e) {
    why = e.what();
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  if (why.empty() && ended != cudaSuccess) why = cudaGetErrorString(ended);
  if (why.empty()) {
    const cudaError_t made = cudaGraphInstantiate(&exec_, graph, 0);
    if (made != cudaSuccess) why = cudaGetErrorString(made);
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (!why.empty()) {
    cudaGetLastError();  // a failed capture leaves its error behind; nothing ran
    exec_ = nullptr;
    return false;
  }
  return true;
}

void StepGraph::replay() {
  args_.upload(stream_);
  check(cudaGraphLaunch(exec_, stream_), "graph launch");
}

}  // namespace ts::cuda
