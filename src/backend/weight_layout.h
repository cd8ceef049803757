// How the bytes of an uploaded weight are arranged (Weight::layout, cpu::WeightView::layout).
#pragma once

#include <cstdint>

namespace ts {

enum class WeightLayout : uint8_t {
  // The file's rows: row r at data + r * row_stride. Every backend reads this layout.
  Rows,
  // q8_0 rows grouped in panels of 32 for the CPU's AVX512-VNNI kernels, packed in place by
  // Backend::pack_weight(); backend/cpu/panel_layout.h gives the byte order.
  Panels,
};

}  // namespace ts
