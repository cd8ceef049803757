#!/usr/bin/env python3
"""Freeze llama.cpp's own quantisation of a few rows into each low-bit type, for
tests/unit/test_quantize_lowbit.cpp: the bound each of the project's quantisers must meet is
llama.cpp's error on the same rows, computed by the test from the blocks frozen here.

Rows: 32 rows of tiny-moe's blk.1.ffn_up_exps (expert 3; real weights, 256 columns) and 32
synthetic rows (Gaussian, a scale that changes every 32 columns, a few outliers, one all-zero
block). Importance: tiny-moe's imatrix entry of that tensor and expert (in_sum2 / counts).
Each of tq1_0, tq2_0, iq3_xxs, iq3_s, iq2_xxs, iq2_xs, iq2_s, iq1_s, iq1_m is quantised by ggml's
ggml_quantize_chunk (libggml-base, through ctypes) with the importance row (`<type>.imatrix`)
and, for the types ggml quantises without one, without (`<type>.plain`).

Writes one GGUF (gguf-py): tensors `x` (f32, 64 x 256), `importance` (f32, 256) and the blocks
of each type as that type.

Usage: PYTHONPATH=<llama.cpp>/gguf-py python3 tools/reference/make_lowbit_quant_fixture.py \
           TINY_MOE_BF16_GGUF TINY_MOE_IMATRIX_GGUF LIBGGML_BASE_SO OUT_GGUF
"""

import ctypes
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader, GGUFWriter
from gguf.quants import dequantize

TYPES = [T.TQ1_0, T.TQ2_0, T.IQ3_XXS, T.IQ3_S, T.IQ2_XXS, T.IQ2_XS, T.IQ2_S, T.IQ1_S, T.IQ1_M]
# ggml_quantize_requires_imatrix
NEEDS_IMATRIX = {T.IQ2_XXS, T.IQ2_XS, T.IQ1_S}
BLOCK_BYTES = {T.TQ1_0: 54, T.TQ2_0: 66, T.IQ3_XXS: 98, T.IQ3_S: 110, T.IQ2_XXS: 66,
               T.IQ2_XS: 74, T.IQ2_S: 82, T.IQ1_S: 50, T.IQ1_M: 56}
TENSOR = "blk.1.ffn_up_exps.weight"
EXPERT = 3
COLS = 256


def tensor(reader, name):
    for t in reader.tensors:
        if t.name == name:
            return t
    raise SystemExit(f"{name}: not in the file")


def real_rows(bf16_path):
    t = tensor(GGUFReader(bf16_path), TENSOR)
    w = dequantize(t.data, t.tensor_type).reshape(8, -1, COLS)
    return np.ascontiguousarray(w[EXPERT, :32], dtype=np.float32)


def synthetic_rows():
    rng = np.random.default_rng(20261205)
    x = rng.standard_normal((32, COLS)).astype(np.float32)
    x *= np.exp2(rng.integers(-6, 2, size=(32, COLS // 32))).repeat(32, axis=1).astype(np.float32)
    spikes = rng.random((32, COLS)) < 0.01
    x[spikes] *= 8
    x[5, :] = 0  # an all-zero row: every type must keep it zero
    return x


def importance(imatrix_path):
    r = GGUFReader(imatrix_path)
    sums = np.asarray(tensor(r, TENSOR + ".in_sum2").data, dtype=np.float32).reshape(-1, COLS)
    counts = np.asarray(tensor(r, TENSOR + ".counts").data, dtype=np.float32).reshape(-1)
    return np.ascontiguousarray(sums[EXPERT] / counts[EXPERT], dtype=np.float32)


def ggml_quantize(lib, qtype, x, imp):
    rows = x.shape[0]
    out = np.zeros(rows * COLS // 256 * BLOCK_BYTES[qtype], dtype=np.uint8)
    f32p = ctypes.POINTER(ctypes.c_float)
    n = lib.ggml_quantize_chunk(int(qtype), x.ctypes.data_as(f32p), out.ctypes.data_as(ctypes.c_void_p),
                                0, rows, COLS, imp.ctypes.data_as(f32p) if imp is not None else None)
    assert n == out.size, (qtype, n, out.size)
    return out


def main():
    bf16_path, imatrix_path, lib_path, out_path = sys.argv[1:5]
    lib = ctypes.CDLL(lib_path)
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    x = np.ascontiguousarray(np.concatenate([real_rows(bf16_path), synthetic_rows()]))
    imp = importance(imatrix_path)
    w = GGUFWriter(out_path, "lowbit_quant_reference")
    w.add_tensor("x", x)
    w.add_tensor("importance", imp)
    for qtype in TYPES:
        variants = [("imatrix", imp)] + ([] if qtype in NEEDS_IMATRIX else [("plain", None)])
        for suffix, weights in variants:
            blocks = ggml_quantize(lib, qtype, x, weights).reshape(x.shape[0], -1)
            w.add_tensor(f"{qtype.name.lower()}.{suffix}", blocks, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
