// One sequence's state: what each layer's token mixer keeps between forward passes, allocated whole
// at creation (its size is part of the announced footprint), and how many positions it covers.
// Attention layers keep K and V rows for `ctx` positions; MLA layers one row of latent and rope key
// a position (the view's k and v are that one buffer); Gated DeltaNet layers keep a convolution
// window and a recurrent matrix, which summarise every position so far and cannot be cut back to
// a prefix. For those, the cache keeps a few checkpoints (copies of the recurrent state at chosen
// positions) so that a sequence can return to an earlier position: to the latest checkpoint at or
// before it, the tokens after that fed again by the caller.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace ts {

class Engine;

// One DeltaNet layer's recurrent state in backend memory (f32): the convolution's last inputs
// [conv_kernel - 1][channels] and the recurrent matrix [n_v_heads][k_head_dim][v_head_dim].
struct DeltaStateView {
  float* window = nullptr;
  float* state = nullptr;
};

class KvCache {
 public:
  // Holds engine.options().state_checkpoints checkpoints (none without DeltaNet layers).
  KvCache(Engine& engine, int64_t ctx);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvView& layer(int64_t l) const { return layers_[static_cast<size_t>(l)]; }
  const DeltaStateView& delta(int64_t l) const { return delta_[static_cast<size_t>(l)]; }
  int64_t ctx() const { return ctx_; }
  int64_t n_past() const { return n_past_; }
  // Bytes of the KV rows and of the recurrent state with its checkpoints.
  uint64_t bytes() const { return bytes_; }
  bool recurrent() const { return state_floats_ > 0; }

  // The forward pass stored rows for `n` more positions.
  void advance(int64_t n);
  // Keeps the recurrent state at n_past() in a checkpoint (replacing the oldest when all are
  // taken); nothing without recurrent layers or when one is already at n_past().
  void checkpoint();
  // The furthest position <= n (n <= n_past()) this cache can return to: n itself without
  // recurrent layers or when n == n_past(), else the latest checkpoint at or before n (0: the
  // empty state).
  int64_t resumable(int64_t n) const;
  // Returns to resumable(n): positions after it are forgotten. Returns that position; the caller
  // feeds the tokens from there to n again.
  int64_t rewind(int64_t n);
  // Makes this cache's first rows those of `from` (of the same engine): the first
  // from.resumable(rows) of them, its recurrent state at that position with them. Returns how many
  // (a sequence that starts like another's takes its rows instead of computing them again).
  int64_t copy_rows_from(const KvCache& from, int64_t rows);

  // M-RoPE: the rotary position of a row fed without explicit positions is its row plus the shift
  // in force there. After an image its tokens' positions advance by less than their rows (an
  // image's rows share positions), so the text after it is shifted back. The shift holds from
  // row n_past() on; rewinding before that forgets it.
  int64_t rope_shift() const { return shifts_.empty() ? 0 : shifts_.back().second; }
  void set_rope_shift(int64_t shift);

 private:
  struct Checkpoint {
    int64_t pos = -1;  // -1: empty
    uint64_t made = 0;
    std::vector<float*> layers;  // per DeltaNet layer: window then state, as the live state
  };
  // The live state's buffer of DeltaNet layer l (window then state, contiguous).
  float* live(size_t l) const { return delta_[l].window; }
  void copy_state(const std::vector<float*>& to, const std::vector<float*>& from);
  void zero_state();
  const Checkpoint* latest_at_or_before(int64_t n) const;

  Backend& backend_;
  int64_t ctx_;
  int64_t n_past_ = 0;
  uint64_t bytes_ = 0;
  std::vector<KvView> layers_;         // per layer; empty views for DeltaNet layers
  std::vector<size_t> owns_;           // the layers whose rows this cache allocated
  std::vector<DeltaStateView> delta_;  // per layer; empty views for attention layers
  std::vector<size_t> delta_layers_;   // which layers are DeltaNet
  int64_t state_floats_ = 0;           // per DeltaNet layer
  std::vector<Checkpoint> checkpoints_;
  uint64_t made_ = 0;
  std::vector<std::pair<int64_t, int64_t>> shifts_;  // (first row, rope shift), rows ascending
};

}  // namespace ts
