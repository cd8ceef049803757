#!/usr/bin/env python3
"""A third opinion for tools/llama_cpp_reference.py: the logits of a real GGUF model computed in
float64 numpy from its dequantised weights (the `gguf` package's dequantisers), with no activation
quantisation and no f16 KV cache. Both turbospark and llama.cpp quantise activations to int8 per
block for their integer dot products; this reference says which of the two is nearer the exact
result when they disagree. Families: llama (SmolLM2) and gemma3. A measuring tool only.

  python3 tools/gguf_float_reference.py MODEL TOKEN_IDS_CSV OUT.f32   (logits [tokens, vocab])
"""
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


class Weights:
    def __init__(self, path):
        self.r = GGUFReader(path)
        self.t = {t.name: t for t in self.r.tensors}
        self.arch = self.field("general.architecture")

    def field(self, key, default=None):
        f = self.r.fields.get(key)
        return default if f is None else f.contents()

    def hp(self, key, default=None):
        return self.field(f"{self.arch}.{key}", default)

    def get(self, name):
        t = self.t[name]
        return dequantize(t.data, t.tensor_type).astype(np.float64)


def rms_norm(x, w, eps):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w


def rope(x, pos, base, neox):
    # x: [T, heads, dim]; neox rotates (i, i + dim/2) pairs, the GGUF llama layout adjacent pairs.
    dim = x.shape[-1]
    inv = base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    ang = pos[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    out = x.copy()
    if neox:
        a, b = x[..., : dim // 2], x[..., dim // 2:]
        out[..., : dim // 2], out[..., dim // 2:] = a * cos - b * sin, a * sin + b * cos
    else:
        a, b = x[..., 0::2], x[..., 1::2]
        out[..., 0::2], out[..., 1::2] = a * cos - b * sin, a * sin + b * cos
    return out


def attention(q, k, v, scale, window):
    T, H, D = q.shape
    group = H // k.shape[1]
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    allowed = (j <= i) & ((i - j) < window if window else True)
    out = np.empty((T, H, v.shape[-1]))
    for h in range(H):
        s = q[:, h, :] @ k[:, h // group, :].T * scale
        s = np.where(allowed, s, -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        out[:, h, :] = p @ v[:, h // group, :]
    return out.reshape(T, -1)


def forward(w, ids, last=0):
    """Logits of every position, or of the last `last` ones."""
    gemma = w.arch == "gemma3"
    n_layer = w.hp("block_count")
    n_head = w.hp("attention.head_count")
    n_kv = w.hp("attention.head_count_kv")
    eps = w.hp("attention.layer_norm_rms_epsilon")
    emb = w.get("token_embd.weight")
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)
    h = emb[ids]
    if gemma:
        h = h * np.sqrt(np.float64(h.shape[1]))
    for l in range(n_layer):
        p = f"blk.{l}."
        x = rms_norm(h, w.get(p + "attn_norm.weight"), eps)
        q = x @ w.get(p + "attn_q.weight").T
        k = x @ w.get(p + "attn_k.weight").T
        v = x @ w.get(p + "attn_v.weight").T
        D = q.shape[1] // n_head
        q, k, v = q.reshape(T, n_head, D), k.reshape(T, n_kv, D), v.reshape(T, n_kv, -1)
        if gemma:
            # The GGUF converter stores Gemma's (1 + w) norm weights with the 1 already added.
            q = rms_norm(q, w.get(p + "attn_q_norm.weight"), eps)
            k = rms_norm(k, w.get(p + "attn_k_norm.weight"), eps)
            sliding = (l + 1) % 6 != 0
            base = 10000.0 if sliding else w.hp("rope.freq_base")
            window = w.hp("attention.sliding_window") if sliding else 0
        else:
            base, window = w.hp("rope.freq_base", 10000.0), 0
        q, k = rope(q, pos, base, gemma), rope(k, pos, base, gemma)
        a = attention(q, k, v, 1.0 / np.sqrt(D), window) @ w.get(p + "attn_output.weight").T
        if gemma:
            a = rms_norm(a, w.get(p + "post_attention_norm.weight"), eps)
        h = h + a
        x = rms_norm(h, w.get(p + "ffn_norm.weight"), eps)
        g = x @ w.get(p + "ffn_gate.weight").T
        u = x @ w.get(p + "ffn_up.weight").T
        if gemma:
            act = 0.5 * g * (1 + np.tanh(np.sqrt(2 / np.pi) * (g + 0.044715 * g**3)))
        else:
            act = g / (1 + np.exp(-g))
        f = (act * u) @ w.get(p + "ffn_down.weight").T
        if gemma:
            f = rms_norm(f, w.get(p + "post_ffw_norm.weight"), eps)
        h = h + f
    h = rms_norm(h[-last:] if last else h, w.get("output_norm.weight"), eps)
    head = w.get("output.weight") if "output.weight" in w.t else emb
    return h @ head.T


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    ids = [int(x) for x in sys.argv[2].split(",")]
    forward(Weights(sys.argv[1]), ids).astype(np.float32).tofile(sys.argv[3])


if __name__ == "__main__":
    main()
