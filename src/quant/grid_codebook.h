// The i-quant grids (iq_grids.h) seen from the quantiser's side: each entry as one quant level per
// element (the rank of its magnitude among the grid's distinct magnitudes), a map from any point
// of the level lattice to the entry that is that point, and, for the points that are no entry,
// the entries nearest to them. A search rounds each element to its nearest level and, where the
// rounded group is not an entry (most of the lattice is not: the grids keep the 256..2048 points
// that real weights fall on most), chooses among those neighbours by weighted error. The method
// is llama.cpp's (ggml-quants.c, iq2xs_init_impl / iq3xs_init_impl); the tables are built here
// from the dequantisation grids, once per process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ts {

class GridCodebook {
 public:
  // `group` elements an entry (4 or 8), entries the grid's bytes (int8 for the i1 grid), and the
  // neighbours of an off-grid point the entries at its `rings` smallest distinct distances.
  GridCodebook(const void* grid, int entries, int group, int rings);

  int group() const { return group_; }
  int levels() const { return levels_; }
  // Entry e's level of element j.
  int level(int e, int j) const { return levels_of_[static_cast<size_t>(e) * group_ + j]; }

  // The lattice point of `group` levels (each < levels()).
  uint32_t key(const int8_t* l) const;
  // The entry at that point, or -1.
  int entry(uint32_t key) const { return map_[key]; }
  // The entries nearest an off-grid point (entry(key) < 0): count, then a pointer to them,
  // nearest first.
  int neighbours(uint32_t key, const uint16_t*& list) const;
  // The neighbour of an off-grid point of least error sum w (value[level] - x)^2 over a group,
  // value[l] the (scaled) value of level l.
  int nearest(uint32_t key, const float* x, const float* w, const float* value) const;

 private:
  int group_, levels_, key_bits_;
  std::vector<uint8_t> levels_of_;
  std::vector<int32_t> map_;          // entry, or -(offset + 1) into neighbours_
  std::vector<uint16_t> neighbours_;  // at each offset: a count, then that many entries
};

// The codebooks of each grid type, built on first use (thread-safe).
const GridCodebook& iq2xxs_codebook();
const GridCodebook& iq2xs_codebook();
const GridCodebook& iq2s_codebook();
const GridCodebook& iq3xxs_codebook();
const GridCodebook& iq3s_codebook();
const GridCodebook& iq1s_codebook();

}  // namespace ts
