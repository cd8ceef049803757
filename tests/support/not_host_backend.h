// A backend that is not the host's and fails every op ("test: the backend was used"): shows how
// far Engine::open() gets with a device backend where there is no device.
#pragma once

#include "backend/backend.h"
#include "core/error.h"

namespace ts::test {

class NotHost final : public Backend {
 public:
  std::string name() const override { return "not-host"; }
  void* alloc(size_t) override { unused(); }
  void free(void*) override {}
  void to_device(void*, const void*, size_t) override { unused(); }
  void to_host(void*, const void*, size_t) override { unused(); }
  Weight upload_weight(DType, int64_t, int64_t, size_t, const void*) override { unused(); }
  void release_weight(Weight&) override {}
  void embed(const Weight&, const int32_t*, int64_t, float, float*) override { unused(); }
  void rms_norm(const float*, const float*, int64_t, int64_t, float, bool, float*) override {
    unused();
  }
  void rms_norm_heads(float*, const float*, int64_t, int64_t, int64_t, float, bool) override {
    unused();
  }
  void matmul(const Weight&, const float*, int64_t, float*) override { unused(); }
  void add_bias(float*, const float*, int64_t, int64_t) override { unused(); }
  void add(float*, const float*, int64_t) override { unused(); }
  void rope(float*, int64_t, int64_t, const int32_t*, const RopeArgs&) override { unused(); }
  void kv_store(const KvView&, const float*, const float*, int64_t, const int32_t*) override {
    unused();
  }
  void attention(const float*, const KvView&, int64_t, const int32_t*, const AttentionArgs&,
                 float*) override {
    unused();
  }
  void glu(Glu, const float*, const float*, int64_t, int64_t, int64_t, float*) override {
    unused();
  }
  void scatter_add_rows(float*, const float*, const int32_t*, const float*, int64_t,
                        int64_t) override {
    unused();
  }
  void gather_rows(const float*, const int32_t*, int64_t, int64_t, float*) override { unused(); }
  void softcap(float*, int64_t, float) override { unused(); }

 private:
  [[noreturn]] static void unused() { fail(ErrorKind::Runtime, "test: the backend was used"); }
};

}  // namespace ts::test
