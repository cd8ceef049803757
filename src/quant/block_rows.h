// A row of n values quantised block by block by a one-block quantiser: each block gets its
// slice of the row and of the importance row (null: none). Shared by the searched quantisers.
#pragma once

#include <cstdint>

namespace ts {

template <class Block>
void quantize_blocks(void (*one)(const float*, const float*, Block&), const float* x, void* dst,
                     int64_t n, int block_elems, const float* importance) {
  Block* blocks = static_cast<Block*>(dst);
  for (int64_t i = 0; i < n / block_elems; ++i)
    one(x + i * block_elems, importance != nullptr ? importance + i * block_elems : nullptr,
        blocks[i]);
}

}  // namespace ts
