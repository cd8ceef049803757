#!/usr/bin/env python3
"""Freeze dequantisation test vectors for tests/unit/test_quant_dequant.cpp.

For every weight type, random blocks plus blocks with extreme scale fields (f16 max, min normal,
subnormals, +-0, inf, NaN) and extreme quant bytes (all 0x00, all 0xFF) are dequantised with the
gguf package's numpy dequantisers, an implementation independent of ours. Each type gets
`<type>.blocks` (the raw blocks) and `<type>.f32` (the expected floats, little-endian). The
f32 -> f16 / bf16 roundings are frozen too: `f32_to_half.f32` (inputs), `.f16` (numpy's
astype(float16)) and `.bf16` (gguf's bf16 quantiser, which matches ggml's).

The low-bit types (i-quants of 1-3 bits, ternary) get fewer blocks, to keep the fixtures small:
a few random and extreme blocks in `<type>.blocks` / `.f32`, and blocks that use every entry of the
type's grid in `<type>.grid.blocks` with only the FNV-1a 64 hash of their dequantised f32 bytes in
`<type>.grid.fnv1a` (16 hex digits).

Usage: pip install gguf numpy; python3 tools/gen_quant_vectors.py [out_dir]
"""

import pathlib
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

# Byte offsets of the f16 scale fields (d, and dmin / m where present) inside each block.
SCALE_OFFSETS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.IQ4_NL: [0], T.IQ4_XS: [0],
}
# The types added later draw from a generator of their own, so that the earlier files stay as
# they were frozen.
LATER_TYPES = {T.IQ4_NL: 20261204, T.IQ4_XS: 20261205}

# f16 bit patterns: max, -max, min normal, largest and smallest subnormal, +0, -0, inf, NaN, 1.0.
SPECIAL_F16 = [0x7BFF, 0xFBFF, 0x0400, 0x03FF, 0x0001, 0x0000, 0x8000, 0x7C00, 0x7E00, 0x3C00]
SPECIAL_F32 = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 3.4028235e38, 1.1754944e-38,
               1.4e-45, 65504.0, 65520.0, 65519.996, 6.0e-8, 2.98e-8, 5.96e-8]


def random_blocks(rng, qtype, count):
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(count, block_bytes), dtype=np.uint8)
    offsets = SCALE_OFFSETS[qtype]
    # Sane scales for most random blocks (random f16 bits are often huge or NaN).
    for o in offsets:
        sane = rng.uniform(-0.05, 0.05, size=count).astype(np.float16)
        blocks[:, o:o + 2] = sane.view(np.uint8).reshape(count, 2)
    return blocks


def extreme_blocks(rng, qtype):
    _, block_bytes = GGML_QUANT_SIZES[qtype]
    offsets = SCALE_OFFSETS[qtype]
    out = []
    for bits in SPECIAL_F16:  # every scale field set to one special value, random quants
        b = rng.integers(0, 256, size=block_bytes, dtype=np.uint8)
        for o in offsets:
            b[o:o + 2] = np.array([bits], dtype=np.uint16).view(np.uint8)
        out.append(b)
    for fill in (0x00, 0xFF):  # all quant bytes 0x00 / 0xFF with ordinary scales
        b = np.full(block_bytes, fill, dtype=np.uint8)
        for i, o in enumerate(offsets):
            b[o:o + 2] = np.array([0.0123 if i == 0 else -0.0071], dtype=np.float16).view(np.uint8)
        out.append(b)
    out.append(np.full(block_bytes, 0xFF, dtype=np.uint8))  # every byte 0xFF: NaN scales
    out.append(np.zeros(block_bytes, dtype=np.uint8))
    return np.stack(out)


def quantised_blocks(rng, qtype, count):
    """Blocks made by quantising real-looking data, so the scales have realistic structure."""
    block_elems, _ = GGML_QUANT_SIZES[qtype]
    try:
        data = rng.standard_normal(size=(count, block_elems)).astype(np.float32)
        return quantize(data, qtype).reshape(count, -1)
    except NotImplementedError:  # gguf quantises only some types; the random blocks cover the rest
        return None


def write(out_dir, name, raw, expected):
    (out_dir / f"{name}.blocks").write_bytes(np.ascontiguousarray(raw).tobytes())
    (out_dir / f"{name}.f32").write_bytes(np.ascontiguousarray(expected, dtype="<f4").tobytes())


def freeze_blocks(out_dir, rng, qtype):
    block_elems, _ = GGML_QUANT_SIZES[qtype]
    count = 24 if block_elems == 32 else 8
    parts = [random_blocks(rng, qtype, count), extreme_blocks(rng, qtype)]
    q = quantised_blocks(rng, qtype, 4)
    if q is not None:
        parts.append(q)
    raw = np.concatenate(parts)
    expected = dequantize(raw.reshape(-1), qtype).reshape(-1)
    write(out_dir, qtype.name.lower(), raw, expected)


def freeze_mxfp4(out_dir, rng):
    """MXFP4's scale is one e8m0 byte: every one of the 256 values, random blocks, and blocks
    quantised from real-looking data."""
    _, block_bytes = GGML_QUANT_SIZES[T.MXFP4]
    every_scale = rng.integers(0, 256, size=(256, block_bytes), dtype=np.uint8)
    every_scale[:, 0] = np.arange(256, dtype=np.uint8)
    parts = [every_scale, rng.integers(0, 256, size=(24, block_bytes), dtype=np.uint8),
             np.zeros((1, block_bytes), np.uint8), np.full((1, block_bytes), 0xFF, np.uint8)]
    q = quantised_blocks(rng, T.MXFP4, 4)
    if q is not None:
        parts.append(q)
    raw = np.concatenate(parts)
    write(out_dir, "mxfp4", raw, dequantize(raw.reshape(-1), T.MXFP4).reshape(-1))


# The low-bit types: offsets of the f16 scale (IQ1_M keeps its scale in the top nibbles of four u16
# at bytes 48..55, handled apart), and the number of grid entries (0: no grid).
LOWBIT = {
    T.IQ2_XXS: ([0], 256), T.IQ2_XS: ([0], 512), T.IQ2_S: ([0], 1024), T.IQ3_XXS: ([0], 256),
    T.IQ3_S: ([0], 512), T.IQ1_S: ([0], 2048), T.IQ1_M: ([], 2048), T.TQ1_0: ([52], 0),
    T.TQ2_0: ([64], 0),
}
LOWBIT_SPECIAL_F16 = [0x7BFF, 0x0001, 0x7C00, 0x7E00]


def set_scale(block, qtype, bits):
    offsets = LOWBIT[qtype][0]
    if qtype == T.IQ1_M:
        sc = block[48:56].view(np.uint16)
        for i in range(4):
            sc[i] = (sc[i] & 0x0FFF) | (((bits >> (4 * i)) & 0xF) << 12)
    for o in offsets:
        block[o:o + 2] = np.array([bits], dtype=np.uint16).view(np.uint8)


def sane_bits(rng):
    return int(np.array([rng.uniform(-0.05, 0.05)], dtype=np.float16).view(np.uint16)[0])


def set_grid_index(block, qtype, g, idx):
    """Makes group g of the block use grid entry idx."""
    if qtype == T.IQ2_XXS:
        block[2 + 8 * (g // 4) + g % 4] = idx
    elif qtype == T.IQ2_XS:
        qs = block[2:66].view(np.uint16)
        qs[g] = (int(qs[g]) & ~511) | idx
    elif qtype == T.IQ2_S:
        block[2 + g] = idx & 0xFF
        q = 66 + g // 4
        block[q] = (int(block[q]) & ~(3 << (2 * (g % 4)))) | ((idx >> 8) << (2 * (g % 4)))
    elif qtype == T.IQ3_XXS:
        block[2 + g] = idx
    elif qtype == T.IQ3_S:
        block[2 + g] = idx & 0xFF
        q = 66 + g // 8
        block[q] = (int(block[q]) & ~(1 << (g % 8))) | ((idx >> 8) << (g % 8))
    elif qtype == T.IQ1_S:
        block[2 + g] = idx & 0xFF
        qh = block[34:50].view(np.uint16)
        sh = 3 * (g % 4)
        qh[g // 4] = (int(qh[g // 4]) & ~(7 << sh)) | ((idx >> 8) << sh)
    elif qtype == T.IQ1_M:
        block[g] = idx & 0xFF
        q, sh = 32 + g // 2, 4 * (g % 2)
        block[q] = (int(block[q]) & ~(7 << sh)) | ((idx >> 8) << sh)


def fnv1a64(data: bytes) -> int:
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def freeze_lowbit(out_dir, rng, qtype):
    _, block_bytes = GGML_QUANT_SIZES[qtype]
    _, grid_size = LOWBIT[qtype]
    blocks = []
    for _ in range(2):  # random
        b = rng.integers(0, 256, size=block_bytes, dtype=np.uint8)
        set_scale(b, qtype, sane_bits(rng))
        blocks.append(b)
    for bits in LOWBIT_SPECIAL_F16:  # extreme scales, random quants
        b = rng.integers(0, 256, size=block_bytes, dtype=np.uint8)
        set_scale(b, qtype, bits)
        blocks.append(b)
    for fill in (0x00, 0xFF):  # extreme quants, an ordinary scale
        b = np.full(block_bytes, fill, dtype=np.uint8)
        set_scale(b, qtype, 0x2250)
        blocks.append(b)
    q = quantised_blocks(rng, qtype, 1)
    if q is not None:
        blocks.extend(q)
    raw = np.stack(blocks)
    name = qtype.name.lower()
    write(out_dir, name, raw, dequantize(raw.reshape(-1), qtype).reshape(-1))
    if grid_size == 0:
        return
    groups = 64 if qtype in (T.IQ3_XXS, T.IQ3_S) else 32
    grid_blocks = []
    for k in range(grid_size // groups):
        b = rng.integers(0, 256, size=block_bytes, dtype=np.uint8)
        set_scale(b, qtype, sane_bits(rng))
        for g in range(groups):
            set_grid_index(b, qtype, g, k * groups + g)
        grid_blocks.append(b)
    raw = np.stack(grid_blocks)
    (out_dir / f"{name}.grid.blocks").write_bytes(raw.tobytes())
    expected = dequantize(raw.reshape(-1), qtype).reshape(-1).astype("<f4")
    (out_dir / f"{name}.grid.fnv1a").write_text(f"{fnv1a64(expected.tobytes()):016x}\n")


def main():
    np.seterr(all="ignore")  # inf and NaN scales are part of the test
    out_dir = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/quant")
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20261202)

    for qtype in SCALE_OFFSETS:
        if qtype not in LATER_TYPES:
            freeze_blocks(out_dir, rng, qtype)

    # Plain float types: random values plus specials, as their raw encodings.
    f32 = np.concatenate([rng.standard_normal(240).astype(np.float32),
                          np.array(SPECIAL_F32, dtype=np.float32)])
    write(out_dir, "f32", f32.view(np.uint8), dequantize(f32.view(np.uint8), T.F32))
    f16_bits = np.concatenate([rng.integers(0, 1 << 16, 496, dtype=np.uint16),
                               np.array(SPECIAL_F16 + [0xFC00, 0xFE00, 0x7C01, 0x8001, 0x87FF,
                                                       0x0200], dtype=np.uint16)])
    write(out_dir, "f16", f16_bits.view(np.uint8), dequantize(f16_bits.view(np.uint8), T.F16))
    bf16_bits = rng.integers(0, 1 << 16, 512, dtype=np.uint16)
    write(out_dir, "bf16", bf16_bits.view(np.uint8), dequantize(bf16_bits.view(np.uint8), T.BF16))

    # Rounding f32 -> f16 / bf16: random values at every magnitude, exact ties and the specials.
    mags = rng.uniform(-30, 17, 3000)
    values = (rng.choice([-1.0, 1.0], 3000) * np.exp2(mags)).astype(np.float32)
    finite = f16_bits[(f16_bits & 0x7C00) != 0x7C00].view(np.float16)
    ties = finite.astype(np.float32).view(np.uint32) + np.uint32(1 << 12)  # halfway up (normals)
    bf_ties = rng.integers(0, 1 << 31, 200, dtype=np.uint32) & np.uint32(0xFFFF0000)
    bf_ties = bf_ties | np.uint32(0x8000)
    src = np.concatenate([values, ties.view(np.float32), bf_ties.view(np.float32),
                          np.array(SPECIAL_F32, dtype=np.float32)])
    (out_dir / "f32_to_half.f32").write_bytes(src.astype("<f4").tobytes())
    (out_dir / "f32_to_half.f16").write_bytes(src.astype("<f2").tobytes())
    (out_dir / "f32_to_half.bf16").write_bytes(quantize(src, T.BF16).tobytes())

    for qtype, seed in LATER_TYPES.items():
        freeze_blocks(out_dir, np.random.default_rng(seed), qtype)
    freeze_mxfp4(out_dir, np.random.default_rng(20261206))
    for k, qtype in enumerate(LOWBIT):
        freeze_lowbit(out_dir, np.random.default_rng(20261207 + k), qtype)


if __name__ == "__main__":
    main()
