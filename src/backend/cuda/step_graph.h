// A recorded step of Backend::run_recorded: the CUDA graph of its ops, and the table of host
// arguments (token ids, positions) that its kernels read from device memory. A decode step is a
// few hundred small launches; replaying them as one graph removes the launch gaps between them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace ts::cuda {

// The host arguments of a recording, one device slot per distinct (host address, size). The
// graph's kernels read the slots; upload() copies every argument afresh from its host address
// before a replay.
class ArgTable {
 public:
  explicit ArgTable(size_t capacity);
  ~ArgTable();
  ArgTable(const ArgTable&) = delete;
  ArgTable& operator=(const ArgTable&) = delete;

  // The device slot of `bytes` at `host`; fails when the table is full.
  const void* slot(const void* host, size_t bytes);
  // Copies every argument into its slot on `stream`, once the previous upload has left the
  // pinned buffer.
  void upload(cudaStream_t stream);

 private:
  struct Entry {
    const void* host;
    size_t bytes;
    size_t offset;
  };
  std::vector<Entry> entries_;
  unsigned char* pinned_ = nullptr;
  unsigned char* device_ = nullptr;
  size_t capacity_ = 0;
  size_t used_ = 0;
  cudaEvent_t uploaded_ = nullptr;
};

class StepGraph {
 public:
  StepGraph(cudaStream_t stream, size_t arg_bytes);
  // Device bytes of the argument table of a step whose eager run put `arg_bytes`.
  static size_t table_bytes(size_t arg_bytes);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  ArgTable& args() { return args_; }
  // Captures what `ops` queues on the stream (nothing runs). False, with the reason in `why`
  // and the stream no longer capturing, when an op could not be recorded.
  bool capture(const std::function<void()>& ops, std::string& why);
  // Refreshes the arguments and launches the graph on the stream.
  void replay();

 private:
  cudaStream_t stream_;
  ArgTable args_;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace ts::cuda
