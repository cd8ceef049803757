#include "model/imatrix.h"

#include <cmath>
#include <cstring>
#include <map>

#include "core/error.h"
#include "formats/gguf.h"

namespace ts {
namespace {

bool strip_suffix(std::string& s, const std::string& suffix) {
  if (s.size() <= suffix.size() || s.compare(s.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  s.resize(s.size() - suffix.size());
  return true;
}

std::vector<float> f32_values(const GgufFile& f, const GgufTensor& t) {
  if (t.dtype != DType::F32)
    fail(ErrorKind::Model,
         f.path() + ": imatrix tensor '" + t.name + "' is " + dtype_name(t.dtype) + ", not f32");
  std::vector<float> v(t.elements());
  std::memcpy(v.data(), f.tensor_data(t), v.size() * sizeof(float));
  for (float x : v)
    if (!std::isfinite(x))
      fail(ErrorKind::Model, f.path() + ": imatrix tensor '" + t.name + "' is not finite");
  return v;
}

}  // namespace

Imatrix Imatrix::load(const std::string& path) {
  const auto f = GgufFile::open_single(path);
  struct Pair {
    const GgufTensor* sums = nullptr;
    const GgufTensor* counts = nullptr;
  };
  std::map<std::string, Pair> pairs;
  for (const GgufTensor& t : f->tensors()) {
    std::string name = t.name;
    if (strip_suffix(name, ".in_sum2"))
      pairs[name].sums = &t;
    else if (strip_suffix(name, ".counts"))
      pairs[name].counts = &t;
  }
  if (pairs.empty())
    fail(ErrorKind::Model, path + ": no '<tensor>.in_sum2' entries: not an imatrix GGUF");
  Imatrix m;
  for (const auto& [name, p] : pairs) {
    if (p.sums == nullptr || p.counts == nullptr)
      fail(ErrorKind::Model, path + ": imatrix entry '" + name + "' lacks its " +
                                 (p.sums == nullptr ? "in_sum2" : "counts"));
    const std::vector<float> sums = f32_values(*f, *p.sums);
    const std::vector<float> counts = f32_values(*f, *p.counts);
    if (counts.empty() || sums.size() % counts.size() != 0)
      fail(ErrorKind::Model, path + ": imatrix entry '" + name + "' has " +
                                 std::to_string(sums.size()) + " sums for " +
                                 std::to_string(counts.size()) + " counts");
    const size_t cols = sums.size() / counts.size();
    std::vector<float>& mean = m.means_[name];
    mean.assign(sums.size(), 1.0f);
    for (size_t e = 0; e < counts.size(); ++e) {
      const auto seen = static_cast<float>(std::lround(counts[e]));
      if (seen <= 0) continue;
      for (size_t c = 0; c < cols; ++c) mean[e * cols + c] = sums[e * cols + c] / seen;
    }
  }
  return m;
}

const std::vector<float>* Imatrix::find(const std::string& tensor) const {
  const auto it = means_.find(tensor);
  return it == means_.end() ? nullptr : &it->second;
}

}  // namespace ts
