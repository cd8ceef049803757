// The base of the CUDA op tests (ctest label `cuda`): a CUDA backend and a CPU backend to compare
// it with, device buffers freed after each test, and random inputs. Skips without a device.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"

namespace ts::test {

class CudaOpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device";
    gpu_ = make_cuda_backend(0);
    cpu_ = make_cpu_backend(1);
  }

  void TearDown() override {
    for (void* p : allocations_) gpu_->free(p);
  }

  float* upload(const std::vector<float>& v) {
    auto* p = static_cast<float*>(gpu_->alloc(v.size() * sizeof(float)));
    allocations_.push_back(p);
    gpu_->to_device(p, v.data(), v.size() * sizeof(float));
    return p;
  }

  void* device_bytes(size_t n) {
    void* p = gpu_->alloc(n);
    allocations_.push_back(p);
    return p;
  }

  std::vector<float> download(const float* p, size_t n) {
    std::vector<float> v(n);
    gpu_->to_host(v.data(), p, n * sizeof(float));
    return v;
  }

  std::vector<float> randn(size_t n, float sigma = 1.0f) {
    std::normal_distribution<float> dist(0.0f, sigma);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng_);
    return v;
  }

  std::unique_ptr<Backend> gpu_, cpu_;
  std::vector<void*> allocations_;
  std::mt19937 rng_{1234};
};

}  // namespace ts::test
