// The NCCL communicator (the plugin libturbospark_nccl.so; parallel/nccl.h loads it). Collectives
// are queued on the rank's stream; a row exchange is NCCL's grouped point-to-point sends and
// receives, which NCCL runs as one all-to-all.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <string>

#include "core/error.h"
#include "parallel/communicator.h"
#include "parallel/nccl.h"

namespace ts {
namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(NcclId), "NcclId must hold an ncclUniqueId");

void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess)
    fail(ErrorKind::Runtime, std::string("NCCL ") + what + ": " + ncclGetErrorString(r));
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    fail(ErrorKind::Runtime, std::string("NCCL ") + what + ": " + cudaGetErrorString(e));
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(int rank, int size, const ncclUniqueId& id, int device, cudaStream_t stream)
      : rank_(rank), size_(size), device_(device), stream_(stream) {
    check(cudaSetDevice(device_), "cudaSetDevice");
    if (stream_ == nullptr) {
      check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
      own_stream_ = true;
    }
    check(cudaMalloc(&token_, sizeof(float)), "cudaMalloc");
    check(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
  }
  ~NcclCommunicator() override {
    cudaSetDevice(device_);
    ncclCommDestroy(comm_);
    cudaFree(token_);
    if (own_stream_) cudaStreamDestroy(stream_);
  }
  std::string name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce_sum(float* x, int64_t n) override {
    check(ncclAllReduce(x, x, static_cast<size_t>(n), ncclFloat32, ncclSum, comm_, stream_),
          "all-reduce");
  }

  void exchange_rows(const float* send, float* recv, int64_t width, const RowExchange& x) override {
    check_row_exchange(x, size_);
    check(ncclGroupStart(), "group start");
    for (int p = 0; p < size_; ++p) {
      const auto pi = static_cast<size_t>(p);
      if (x.send_rows[pi] > 0)
        check(ncclSend(send + x.send_row0[pi] * width, static_cast<size_t>(x.send_rows[pi] * width),
                       ncclFloat32, p, comm_, stream_),
              "send");
      if (x.recv_rows[pi] > 0)
        check(ncclRecv(recv + x.recv_row0[pi] * width, static_cast<size_t>(x.recv_rows[pi] * width),
                       ncclFloat32, p, comm_, stream_),
              "recv");
    }
    check(ncclGroupEnd(), "group end");
  }

  void barrier() override {
    check(ncclAllReduce(token_, token_, 1, ncclFloat32, ncclSum, comm_, stream_), "barrier");
    check(cudaStreamSynchronize(stream_), "barrier");
  }

 private:
  int rank_, size_, device_;
  cudaStream_t stream_ = nullptr;
  bool own_stream_ = false;
  float* token_ = nullptr;
  ncclComm_t comm_ = nullptr;
};

}  // namespace
}  // namespace ts

extern "C" int turbospark_nccl_version() {
  int v = 0;
  return ncclGetVersion(&v) == ncclSuccess ? v : 0;
}

extern "C" void turbospark_nccl_unique_id(char* out) {
  ncclUniqueId id;
  ts::check(ncclGetUniqueId(&id), "unique id");
  std::memcpy(out, &id, sizeof id);
}

extern "C" ts::Communicator* turbospark_nccl_create(int rank, int size, const char* id, int device,
                                                    void* stream) {
  using ts::ErrorKind;
  using ts::fail;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  if (count == 0) fail(ErrorKind::Usage, "NCCL: no CUDA device is present");
  if (device < 0 || device >= count)
    fail(ErrorKind::Usage, "NCCL: device " + std::to_string(device) + " of " +
                               std::to_string(count) + " CUDA device(s)");
  if (rank < 0 || rank >= size)
    fail(ErrorKind::Usage, "NCCL: rank " + std::to_string(rank) + " of " + std::to_string(size));
  ncclUniqueId uid;
  std::memcpy(&uid, id, sizeof uid);
  return new ts::NcclCommunicator(rank, size, uid, device, static_cast<cudaStream_t>(stream));
}
