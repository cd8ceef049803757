// The Backend's generic routed-expert ops (what a backend without device kernels for them runs):
// route() is route_token() per row, matmul_indexed() a matmul per chosen expert, combine_experts()
// the zeroed sum in ascending expert order that the host path of the forward pass computes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/routing.h"
#include "core/error.h"

namespace ts {
namespace {

std::vector<float> randn(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(BackendExperts, GenericOpsMatchThePerExpertPath) {
  auto cpu = make_cpu_backend(1);
  std::mt19937 rng(7);
  const int64_t E = 6, k = 3, rows = 16, cols = 64;
  // Routing of two rows: exactly route_token's choice and weights.
  const std::vector<float> logits = randn(static_cast<size_t>(2 * E), rng);
  const RouterArgs args{RouterScoring::SoftmaxTopk, E, k, true, nullptr};
  std::vector<int32_t> ids(static_cast<size_t>(2 * k)), want_ids(ids.size());
  std::vector<float> w(ids.size()), want_w(ids.size());
  cpu->route(logits.data(), 2, args, ids.data(), w.data());
  for (int64_t m = 0; m < 2; ++m)
    route_token(logits.data() + m * E, args, want_ids.data() + m * k, want_w.data() + m * k);
  EXPECT_EQ(ids, want_ids);
  EXPECT_EQ(w, want_w);

  // Per-expert f32 weights, addressed through a table of data pointers.
  std::vector<std::vector<float>> data;
  std::vector<const void*> table;
  for (int64_t e = 0; e < E; ++e) {
    data.push_back(randn(static_cast<size_t>(rows * cols), rng));
    table.push_back(data.back().data());
  }
  const Weight shape{DType::F32, rows, cols, cols * sizeof(float), table[0]};
  // Both rows' experts in one call: x shared by all, one row per expert, or one per token (its k
  // experts sharing it).
  const int64_t n = 2 * k;
  const std::vector<float> x = randn(static_cast<size_t>(n * cols), rng);
  for (const auto& [x_stride, per_x] :
       {std::pair{int64_t{0}, int64_t{1}}, std::pair{cols, int64_t{1}}, std::pair{cols, k}}) {
    std::vector<float> got(static_cast<size_t>(n * rows)), want(got.size());
    cpu->matmul_indexed(shape, table.data(), ids.data(), n, x.data(), x_stride, per_x, got.data());
    for (int64_t i = 0; i < n; ++i) {
      Weight we = shape;
      we.data = table[static_cast<size_t>(ids[static_cast<size_t>(i)])];
      cpu->matmul(we, x.data() + i / per_x * x_stride, 1, want.data() + i * rows);
    }
    EXPECT_EQ(got, want) << "x_stride " << x_stride << ", " << per_x << " experts a row";
  }
  std::vector<float> y_bad(static_cast<size_t>(n * rows));
  for (const int64_t per_x : {int64_t{0}, int64_t{4}})
    EXPECT_THROW(cpu->matmul_indexed(shape, table.data(), ids.data(), n, x.data(), cols, per_x,
                                     y_bad.data()),
                 Error)
        << per_x << " experts a row";

  // Each row: the sum in ascending id order, each term a separate scatter into a zeroed row.
  const std::vector<float> y = randn(static_cast<size_t>(n * rows), rng);
  std::vector<float> got(static_cast<size_t>(2 * rows)), want(got.size(), 0.0f);
  cpu->combine_experts(y.data(), ids.data(), w.data(), 2, k, rows, got.data());
  const int32_t row0 = 0;
  for (int64_t m = 0; m < 2; ++m) {
    std::vector<size_t> order = {0, 1, 2};
    for (size_t& i : order) i += static_cast<size_t>(m * k);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a] < ids[b]; });
    for (size_t i : order)
      cpu->scatter_add_rows(want.data() + m * rows, y.data() + i * rows, &row0, &w[i], 1, rows);
  }
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace ts
