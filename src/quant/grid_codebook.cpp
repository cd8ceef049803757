#include "quant/grid_codebook.h"

#include <algorithm>
#include <cfloat>
#include <cstring>
#include <set>

#include "quant/iq_grids.h"

namespace ts {

GridCodebook::GridCodebook(const void* grid, int entries, int group, int rings) : group_(group) {
  const auto* bytes = static_cast<const int8_t*>(grid);
  // The grid's distinct values, in order, are its levels (three for iq2 / iq1, eight for iq3).
  std::set<int> values(bytes, bytes + static_cast<size_t>(entries) * group);
  const std::vector<int> sorted(values.begin(), values.end());
  levels_ = static_cast<int>(sorted.size());
  key_bits_ = levels_ <= 4 ? 2 : 3;
  levels_of_.resize(static_cast<size_t>(entries) * group);
  for (size_t i = 0; i < levels_of_.size(); ++i)
    levels_of_[i] = static_cast<uint8_t>(
        std::lower_bound(sorted.begin(), sorted.end(), int{bytes[i]}) - sorted.begin());

  map_.assign(size_t{1} << (key_bits_ * group), -1);
  for (int e = 0; e < entries; ++e) {
    int8_t l[8];
    for (int j = 0; j < group; ++j) l[j] = static_cast<int8_t>(level(e, j));
    map_[key(l)] = e;
  }
  // Every lattice point a search can round to (levels < levels_) that is no entry gets the
  // entries at its `rings` smallest squared distances, nearest first (ties by index). Distances
  // are small integers, so the rings are found by marking which occur.
  const int max_d2 = group * (levels_ - 1) * (levels_ - 1);
  std::vector<int> d2(static_cast<size_t>(entries));
  std::vector<char> occurs(static_cast<size_t>(max_d2) + 1);
  for (uint32_t k = 0; k < map_.size(); ++k) {
    int8_t l[8];
    bool reachable = true;
    for (int j = 0; j < group; ++j) {
      l[j] = static_cast<int8_t>((k >> (key_bits_ * j)) & ((1u << key_bits_) - 1));
      reachable = reachable && l[j] < levels_;
    }
    if (!reachable || map_[k] >= 0) continue;
    std::fill(occurs.begin(), occurs.end(), 0);
    for (int e = 0; e < entries; ++e) {
      int d = 0;
      for (int j = 0; j < group; ++j) d += (level(e, j) - l[j]) * (level(e, j) - l[j]);
      d2[static_cast<size_t>(e)] = d;
      occurs[static_cast<size_t>(d)] = 1;
    }
    map_[k] = -static_cast<int32_t>(neighbours_.size()) - 1;
    const size_t count_at = neighbours_.size();
    neighbours_.push_back(0);
    int ring = 0;
    for (int d = 0; d <= max_d2 && ring < rings; ++d) {
      if (!occurs[static_cast<size_t>(d)]) continue;
      ++ring;
      for (int e = 0; e < entries; ++e)
        if (d2[static_cast<size_t>(e)] == d) neighbours_.push_back(static_cast<uint16_t>(e));
    }
    neighbours_[count_at] = static_cast<uint16_t>(neighbours_.size() - count_at - 1);
  }
}

uint32_t GridCodebook::key(const int8_t* l) const {
  uint32_t k = 0;
  for (int j = 0; j < group_; ++j) k |= static_cast<uint32_t>(l[j]) << (key_bits_ * j);
  return k;
}

int GridCodebook::neighbours(uint32_t key, const uint16_t*& list) const {
  const size_t at = static_cast<size_t>(-map_[key] - 1);
  list = neighbours_.data() + at + 1;
  return neighbours_[at];
}

int GridCodebook::nearest(uint32_t key, const float* x, const float* w, const float* value) const {
  const uint16_t* list = nullptr;
  const int count = neighbours(key, list);
  float best = FLT_MAX;
  int best_entry = list[0];
  for (int i = 0; i < count; ++i) {
    float d2 = 0;
    for (int j = 0; j < group_; ++j) {
      const float diff = value[level(list[i], j)] - x[j];
      d2 += w[j] * diff * diff;
    }
    if (d2 < best) {
      best = d2;
      best_entry = list[i];
    }
  }
  return best_entry;
}

// llama.cpp's rings: iq2_s's grid of 1024 is dense enough for the nearest ring alone, iq3_s's
// and the i1 grid's sparse enough to want three.
const GridCodebook& iq2xxs_codebook() {
  static const GridCodebook c(kIq2xxsGrid, 256, 8, 2);
  return c;
}
const GridCodebook& iq2xs_codebook() {
  static const GridCodebook c(kIq2xsGrid, 512, 8, 2);
  return c;
}
const GridCodebook& iq2s_codebook() {
  static const GridCodebook c(kIq2sGrid, 1024, 8, 1);
  return c;
}
const GridCodebook& iq3xxs_codebook() {
  static const GridCodebook c(kIq3xxsGrid, 256, 4, 2);
  return c;
}
const GridCodebook& iq3s_codebook() {
  static const GridCodebook c(kIq3sGrid, 512, 4, 3);
  return c;
}
const GridCodebook& iq1s_codebook() {
  static const GridCodebook c(kIq1sGrid, 2048, 8, 3);
  return c;
}

}  // namespace ts
