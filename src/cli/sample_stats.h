// The mean and sample standard deviation of a benchmark's repetitions.
#pragma once

#include <cmath>
#include <vector>

namespace ts::cli {

inline double sample_mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// With Bessel's correction; 0 for fewer than two samples.
inline double sample_stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = sample_mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

}  // namespace ts::cli
