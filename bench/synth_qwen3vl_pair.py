#!/usr/bin/env python3
"""A Qwen3-VL-2B-shaped vision tower (mmproj GGUF, as llama.cpp's converter writes it) and a
small text model of the width it projects to, with seeded random weights: what `turbospark bench
--image` and llama.cpp's llama-mtmd-cli time an image's encoding on. The vision tower is the real
model's shape (24 blocks of 1024, 16 heads, MLP 4096, patch 16, merge 2, DeepStack taps at 5, 11
and 17, projection 2048); the text model only has to be accepted beside it, so it keeps four
layers (llama.cpp needs one more than the three DeepStack taps) and takes its tokenizer from an
existing qwen3vl GGUF (a fixture's).

  llama-mtmd-cli -m DIR/text.gguf --mmproj DIR/mmproj-f16.gguf --image IMG --chat-template chatml
      -p x -n 1 -t 2        (prints "image slice encoded in N ms")
  turbospark bench -m DIR/text.gguf --mmproj DIR/mmproj-f16.gguf --image IMG -p 0 -n 0 -t 2

  python3 bench/synth_qwen3vl_pair.py --tokenizer-from FIXTURE_TEXT.gguf --out DIR

Writes DIR/text.gguf and DIR/mmproj-f16.gguf (weight matrices f16, norms and biases f32, as the
converter's default). Needs gguf-py (pip install gguf) and numpy.
"""
import argparse
import os

import numpy as np
import gguf

VISION = dict(hidden=1024, heads=16, depth=24, ff=4096, patch=16, merge=2, out=2048,
              n_pos=2304, deepstack=(5, 11, 17), image_size=768)
TEXT = dict(layers=4, hidden=2048, heads=16, kv_heads=8, head_dim=128, ff=6144, sections=[24, 20, 20, 0])


def matrix(rng, cols, rows):
    # GGML order [cols, rows] is numpy's [rows, cols]; the scale keeps activations finite.
    return (rng.standard_normal((rows, cols), dtype=np.float32) / np.sqrt(cols)).astype(np.float16)


def vector(rng, n, one=False):
    v = rng.standard_normal(n, dtype=np.float32) * 0.02
    return v + 1.0 if one else v


def write_mmproj(path, rng):
    v = VISION
    w = gguf.GGUFWriter(path, "clip")
    w.add_type("mmproj")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_uint32("clip.vision.projection_dim", v["out"])
    w.add_uint32("clip.vision.image_size", v["image_size"])
    w.add_uint32("clip.vision.patch_size", v["patch"])
    w.add_uint32("clip.vision.embedding_length", v["hidden"])
    w.add_uint32("clip.vision.feed_forward_length", v["ff"])
    w.add_uint32("clip.vision.block_count", v["depth"])
    w.add_uint32("clip.vision.attention.head_count", v["heads"])
    w.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    w.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    w.add_string("clip.projector_type", "qwen3vl_merger")
    w.add_bool("clip.use_gelu", True)
    w.add_uint32("clip.vision.spatial_merge_size", v["merge"])
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    w.add_array("clip.vision.is_deepstack_layers",
                [i in v["deepstack"] for i in range(v["depth"])])
    h, ff, merged = v["hidden"], v["ff"], v["hidden"] * v["merge"] ** 2
    for b in range(v["depth"]):
        p = f"v.blk.{b}."
        w.add_tensor(p + "attn_qkv.weight", matrix(rng, h, 3 * h))
        w.add_tensor(p + "attn_qkv.bias", vector(rng, 3 * h))
        w.add_tensor(p + "attn_out.weight", matrix(rng, h, h))
        w.add_tensor(p + "attn_out.bias", vector(rng, h))
        w.add_tensor(p + "ffn_up.weight", matrix(rng, h, ff))
        w.add_tensor(p + "ffn_up.bias", vector(rng, ff))
        w.add_tensor(p + "ffn_down.weight", matrix(rng, ff, h))
        w.add_tensor(p + "ffn_down.bias", vector(rng, h))
        for n in ("ln1", "ln2"):
            w.add_tensor(p + n + ".weight", vector(rng, h, one=True))
            w.add_tensor(p + n + ".bias", vector(rng, h))
    for i in range(len(v["deepstack"])):
        p = f"v.deepstack.{i}."
        w.add_tensor(p + "norm.weight", vector(rng, merged, one=True))
        w.add_tensor(p + "norm.bias", vector(rng, merged))
        w.add_tensor(p + "fc1.weight", matrix(rng, merged, merged))
        w.add_tensor(p + "fc1.bias", vector(rng, merged))
        w.add_tensor(p + "fc2.weight", matrix(rng, merged, v["out"]))
        w.add_tensor(p + "fc2.bias", vector(rng, v["out"]))
    w.add_tensor("mm.0.weight", matrix(rng, merged, merged))
    w.add_tensor("mm.0.bias", vector(rng, merged))
    w.add_tensor("mm.2.weight", matrix(rng, merged, v["out"]))
    w.add_tensor("mm.2.bias", vector(rng, v["out"]))
    w.add_tensor("v.post_ln.weight", vector(rng, h, one=True))
    w.add_tensor("v.post_ln.bias", vector(rng, h))
    # The converter splits the Conv3d over its two frames into two 2-D kernels.
    kernel = (rng.standard_normal((h, 3, v["patch"], v["patch"]), dtype=np.float32) /
              np.sqrt(3 * v["patch"] ** 2)).astype(np.float16)
    w.add_tensor("v.patch_embd.weight", kernel)
    w.add_tensor("v.patch_embd.weight.1", kernel)
    w.add_tensor("v.patch_embd.bias", vector(rng, h))
    w.add_tensor("v.position_embd.weight", vector(rng, (v["n_pos"], h)))
    finish(w)


def write_text(path, tokenizer_from, rng):
    t = TEXT
    src = gguf.GGUFReader(tokenizer_from)
    if src.fields["general.architecture"].contents() != "qwen3vl":
        raise SystemExit(f"{tokenizer_from}: not a qwen3vl GGUF")
    w = gguf.GGUFWriter(path, "qwen3vl")
    w.add_block_count(t["layers"])
    w.add_context_length(4096)
    w.add_embedding_length(t["hidden"])
    w.add_feed_forward_length(t["ff"])
    w.add_head_count(t["heads"])
    w.add_head_count_kv(t["kv_heads"])
    w.add_key_length(t["head_dim"])
    w.add_value_length(t["head_dim"])
    w.add_rope_freq_base(5e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_array("qwen3vl.rope.dimension_sections", t["sections"])
    w.add_uint32("qwen3vl.n_deepstack_layers", len(VISION["deepstack"]))
    tokens = src.fields["tokenizer.ggml.tokens"].contents()
    for key, field in src.fields.items():
        if key.startswith("tokenizer."):
            value = field.contents()
            if isinstance(value, list):
                w.add_array(key, value)
            elif isinstance(value, str):
                w.add_string(key, value)
            elif isinstance(value, bool):
                w.add_bool(key, value)
            else:
                w.add_uint32(key, int(value))
    h, q, kv = t["hidden"], t["heads"] * t["head_dim"], t["kv_heads"] * t["head_dim"]
    w.add_tensor("token_embd.weight", matrix(rng, h, len(tokens)))
    w.add_tensor("output_norm.weight", vector(rng, h, one=True))
    for b in range(t["layers"]):
        p = f"blk.{b}."
        w.add_tensor(p + "attn_norm.weight", vector(rng, h, one=True))
        w.add_tensor(p + "attn_q.weight", matrix(rng, h, q))
        w.add_tensor(p + "attn_k.weight", matrix(rng, h, kv))
        w.add_tensor(p + "attn_v.weight", matrix(rng, h, kv))
        w.add_tensor(p + "attn_output.weight", matrix(rng, q, h))
        w.add_tensor(p + "attn_q_norm.weight", vector(rng, t["head_dim"], one=True))
        w.add_tensor(p + "attn_k_norm.weight", vector(rng, t["head_dim"], one=True))
        w.add_tensor(p + "ffn_norm.weight", vector(rng, h, one=True))
        w.add_tensor(p + "ffn_gate.weight", matrix(rng, h, t["ff"]))
        w.add_tensor(p + "ffn_up.weight", matrix(rng, h, t["ff"]))
        w.add_tensor(p + "ffn_down.weight", matrix(rng, t["ff"], h))
    finish(w)


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer-from", required=True, help="a qwen3vl text GGUF")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    write_mmproj(os.path.join(args.out, "mmproj-f16.gguf"), rng)
    write_text(os.path.join(args.out, "text.gguf"), args.tokenizer_from, rng)


if __name__ == "__main__":
    main()
