#include "quant/block_pack.h"

#include <cstring>

namespace ts {

void pack_nibbles32(const uint8_t* q, uint8_t* qs) {
  for (int i = 0; i < kQK32 / 2; ++i)
    qs[i] = static_cast<uint8_t>((q[i] & 0x0F) | ((q[i + 16] & 0x0F) << 4));
}

void pack_fifth_bits32(const uint8_t* q, uint8_t* qh) {
  uint32_t bits = 0;
  for (int i = 0; i < kQK32; ++i) bits |= static_cast<uint32_t>((q[i] >> 4) & 1) << i;
  std::memcpy(qh, &bits, sizeof(bits));
}

void pack_q2_k_quants(const uint8_t* q, uint8_t* qs) {
  std::memset(qs, 0, kQKK / 4);
  for (int e = 0; e < kQKK; ++e) {
    const int h = e / 128, s = (e / 32) % 4, l = e % 32;
    qs[32 * h + l] |= static_cast<uint8_t>((q[e] & 3) << (2 * s));
  }
}

void pack_q3_k(const uint8_t* scale_codes, const uint8_t* q, BlockQ3_K& b) {
  std::memset(b.scales, 0, sizeof(b.scales));
  for (int j = 0; j < 16; ++j) {
    const int code = scale_codes[j];
    b.scales[j % 8] |= static_cast<uint8_t>((code & 0x0F) << (4 * (j / 8)));
    b.scales[8 + j % 4] |= static_cast<uint8_t>((code >> 4) << (2 * (j / 4)));
  }
  std::memset(b.hmask, 0, sizeof(b.hmask));
  std::memset(b.qs, 0, sizeof(b.qs));
  // Low 2 bits as stored; bit 2 is the hmask bit (set means no -4).
  for (int e = 0; e < kQKK; ++e) {
    const int c = e / 32, l = e % 32;
    b.qs[32 * (c / 4) + l] |= static_cast<uint8_t>((q[e] & 3) << (2 * (c % 4)));
    b.hmask[l] |= static_cast<uint8_t>(((q[e] >> 2) & 1) << c);
  }
}

// Inverse of k4_scale_min (blocks.h).
void pack_k4_scales(const uint8_t* sc, const uint8_t* mn, uint8_t* s) {
  std::memset(s, 0, kKScaleBytes);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = sc[j];
      s[j + 4] = mn[j];
    } else {
      s[j + 4] = static_cast<uint8_t>((sc[j] & 0x0F) | ((mn[j] & 0x0F) << 4));
      s[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
      s[j] |= static_cast<uint8_t>((mn[j] >> 4) << 6);
    }
  }
}

void pack_k_nibbles(const uint8_t* q, uint8_t* qs) {
  std::memset(qs, 0, kQKK / 2);
  for (int e = 0; e < kQKK; ++e) {
    const int c = e / 64, n = (e / 32) % 2, l = e % 32;
    qs[32 * c + l] |= static_cast<uint8_t>((q[e] & 0x0F) << (4 * n));
  }
}

void pack_q5_k_high(const uint8_t* q, uint8_t* qh) {
  std::memset(qh, 0, kQKK / 8);
  for (int e = 0; e < kQKK; ++e) qh[e % 32] |= static_cast<uint8_t>(((q[e] >> 4) & 1) << (e / 32));
}

void pack_q6_k_quants(const uint8_t* q, BlockQ6_K& b) {
  std::memset(b.ql, 0, sizeof(b.ql));
  std::memset(b.qh, 0, sizeof(b.qh));
  for (int e = 0; e < kQKK; ++e) {
    const int h = e / 128, r = e % 128;
    b.ql[64 * h + r % 64] |= static_cast<uint8_t>((q[e] & 0x0F) << (4 * (r / 64)));
    b.qh[32 * h + r % 32] |= static_cast<uint8_t>((q[e] >> 4) << (2 * (r / 32)));
  }
}

void pack_iq4_xs_scales(const uint8_t* scale_codes, BlockIQ4_XS& b) {
  b.scales_h = 0;
  std::memset(b.scales_l, 0, sizeof(b.scales_l));
  for (int j = 0; j < 8; ++j) {
    const int code = scale_codes[j];
    b.scales_l[j / 2] |= static_cast<uint8_t>((code & 0x0F) << (4 * (j % 2)));
    b.scales_h |= static_cast<uint16_t>((code >> 4) << (2 * j));
  }
}

namespace {

// Up to five trits as one byte: the base-3 number t[0] t[1] ... (t[0] most significant, padded
// with zero trits to five) scaled from [0, 243) to [0, 256) rounding up, so that the decoder's
// ((u8)(q * 3^n) * 3) >> 8 recovers trit n with a multiply and a shift.
uint8_t pack_trits(const uint8_t* t, int count, int stride) {
  int v = 0;
  for (int n = 0; n < 5; ++n) v = 3 * v + (n < count ? t[n * stride] : 0);
  return static_cast<uint8_t>((v * 256 + 242) / 243);
}

}  // namespace

void pack_tq1_0(const uint8_t* trits, BlockTQ1_0& b) {
  // Elements 0..159: five trits of stride 32 in qs[0..31]; 160..239: stride 16 in qs[32..47];
  // 240..255: four trits of stride 4 in qh[0..3].
  for (int m = 0; m < 32; ++m) b.qs[m] = pack_trits(trits + m, 5, 32);
  for (int m = 0; m < 16; ++m) b.qs[32 + m] = pack_trits(trits + 160 + m, 5, 16);
  for (int m = 0; m < 4; ++m) b.qh[m] = pack_trits(trits + 240 + m, 4, 4);
}

void pack_tq2_0(const uint8_t* trits, BlockTQ2_0& b) {
  std::memset(b.qs, 0, sizeof(b.qs));
  for (int e = 0; e < kQKK; ++e) {
    const int h = e / 128, s = (e / 32) % 4, m = e % 32;
    b.qs[32 * h + m] |= static_cast<uint8_t>(trits[e] << (2 * s));
  }
}

}  // namespace ts
