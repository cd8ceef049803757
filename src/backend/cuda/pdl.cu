#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/pdl.cuh"

namespace ts::cuda {

namespace {
std::atomic<uint64_t> launched{0};
}  // namespace

uint64_t launches() {
  return launched.load(std::memory_order_relaxed);
}

void note_launch() {
  launched.fetch_add(1, std::memory_order_relaxed);
}

bool pdl_enabled() {
  static const bool allowed = [] {
    const char* v = std::getenv("TURBOSPARK_CUDA_PDL");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  // Per device (a process may drive several): 0 unknown, 1 no, 2 yes.
  constexpr int kDevices = 64;
  static int known[kDevices] = {};
  int device = 0;
  if (!allowed || cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices)
    return false;
  if (known[device] == 0) {
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    known[device] = major >= 9 ? 2 : 1;
  }
  return known[device] == 2;
}

}  // namespace ts::cuda
