// Programmatic dependent launch (Hopper, sm_90): every kernel of the backend is launched so that it
// may be scheduled while the kernel before it in the stream is still finishing, and waits for that
// kernel (pdl_wait) before it touches memory that kernel may write or read. A decode step is a
// chain of ~100 kernels, many of them a few microseconds long: without this, each one's launch and
// ramp-up sit in the gap after the previous one ends.
//
// The rule for every kernel launched with launch(): call pdl_enter() (or pdl_launch_dependents()
// and pdl_wait()) before its first access to activations, caches, scratch or anything else another
// kernel writes. Reading weights before it is fine: nothing writes them while kernels run.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>

#include "backend/cuda/cuda_check.h"

namespace ts::cuda {

// Lets the next kernel in the stream be scheduled as soon as every block of this one has started.
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// Waits until the kernels ahead of this one in the stream have finished and their writes are
// visible. Returns at once for a kernel launched the ordinary way.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_enter() {
  pdl_launch_dependents();
  pdl_wait();
}

// True when the current device runs programmatic dependent launches (sm_90 and later) and
// TURBOSPARK_CUDA_PDL is not "0" (the switch measures what they save).
bool pdl_enabled();

// Work the process has put on its streams so far: every kernel of launch(), and every copy, memset
// or cuBLAS call that the backend makes into device memory (it calls note_launch() for those). The
// backend compares two readings to know that nothing ran between a kernel and the next op
// (cuda_backend.cpp, the int8 GEMV's quantised inputs).
uint64_t launches();
void note_launch();

// kernel<<<grid, block, smem, stream>>>(args...) as a programmatic dependent launch where enabled,
// checked: a failed launch is ts::fail naming `what`.
template <class... Params, class... Args>
void launch(const char* what, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
            cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
  check(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...), what);
  note_launch();
}

}  // namespace ts::cuda
