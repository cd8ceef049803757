#!/usr/bin/env python3
"""Makes tests/fixtures/models/gemma4_vision: a tiny random-init Gemma4ForConditionalGeneration
(text: hidden 64, MLP 16, 2 layers (sliding window 16, then global), per-layer inputs of 8, vocab 64,
use_bidirectional_attention "vision"; vision: width 24, MLP 16, 2 blocks, 2 x 2 patches, pooling 3,
clipped linears and standardisation on, at most 70 soft tokens an image) and transformers' float32
reference of it:

  hf/                      the checkpoint as transformers saves it (+ preprocessor_config.json)
  mmproj-f32.gguf          llama.cpp's converter --mmproj --outtype f32 of hf/
  image<i>.png             two images of different aspect ratios
  image_codes.u8           their pixel values through Gemma4ImageProcessorPil as 8-bit codes
                           (code / 255 is HF's value, checked exactly here), the real patches of
                           each image one after the other: [patches][2 * 2 * 3] in HF's order
  image_vision.f32         the vision model's output (pooled, scaled, standardised), both
                           images' tokens one after the other [tokens][24]
  image_embeds.f32         embed_vision's output (the rows the text model takes) [tokens][64]
  ref_logits_image.f32     the prompt with both images (mm_token_type_ids given, as the processor
                           does: bidirectional attention within each image on the sliding layer,
                           causal on the global one) [n][64]
  ref_logits_image_causal_tail.f32  the same prompt with a causal mask everywhere (no
                           mm_token_type_ids: what E2B / E4B, use_bidirectional_attention null,
                           do), its last 8 rows [8][64]
  preprocess/<image>.u8    tests/fixtures/images through the processor: the 8-bit codes of the
                           real patches; meta.json has each one's patch grid
  meta.json                ids, shapes, grids

Needs torch, transformers 5.23, pillow, numpy, and llama.cpp's sources (LLAMA_CPP_DIR, for
convert_hf_to_gguf.py and its gguf-py). Run: LLAMA_CPP_DIR=... python3 tools/reference/make_gemma4_vision_fixture.py
"""
import json
import os
import shutil

import numpy as np
import torch
from PIL import Image
from transformers import Gemma4Config, Gemma4ForConditionalGeneration
from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil

from vision_fixture import convert_mmproj, image

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(REPO, "tests", "fixtures", "models", "gemma4_vision")
IMAGES = os.path.join(REPO, "tests", "fixtures", "images")
BOI, EOI, IMAGE = 58, 59, 60
PATCH, POOL, SOFT = 2, 3, 70
CAUSAL_TAIL = 8

torch.manual_seed(4404)
S, F = "sliding_attention", "full_attention"
text = dict(vocab_size=64, hidden_size=64, intermediate_size=16, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=1, head_dim=16, global_head_dim=32,
            sliding_window=16, layer_types=[S, F],
            rope_parameters={S: {"rope_type": "default", "rope_theta": 10000.0},
                             F: {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                 "rope_theta": 1e6}},
            num_kv_shared_layers=0, hidden_size_per_layer_input=8, vocab_size_per_layer_input=64,
            final_logit_softcapping=30.0, use_bidirectional_attention="vision",
            max_position_embeddings=512, pad_token_id=0, bos_token_id=2, eos_token_id=1,
            tie_word_embeddings=True)
vision = dict(hidden_size=24, intermediate_size=16, num_hidden_layers=2, num_attention_heads=2,
              num_key_value_heads=2, head_dim=12, patch_size=PATCH, pooling_kernel_size=POOL,
              position_embedding_size=36, use_clipped_linears=True, standardize=True,
              rms_norm_eps=1e-6)
config = Gemma4Config(text_config=text, vision_config=vision, audio_config=None,
                      boi_token_id=BOI, eoi_token_id=EOI, image_token_id=IMAGE,
                      video_token_id=61, boa_token_id=62, eoa_token_index=63, audio_token_id=57,
                      initializer_range=0.1, tie_word_embeddings=True)
config._attn_implementation = "eager"
model = Gemma4ForConditionalGeneration(config).eval()
with torch.no_grad():
    # Norms, the layer scalars and the position tables start at 1, the clip bounds at +-inf and
    # the standardisation uninitialised: randomised so every one of them matters (the clips bite on
    # some values).
    for name, p in model.named_parameters():
        if "norm" in name:
            p.copy_(1 + torch.randn_like(p) * 0.2)
        elif name.endswith("position_embedding_table"):
            p.copy_(torch.randn_like(p) * 0.5)
    for name, b in model.named_buffers():
        if name.endswith("layer_scalar"):
            b.copy_(0.5 + torch.rand_like(b))
        elif name.endswith(("input_min", "output_min")):
            b.fill_(-float(torch.empty(()).uniform_(0.6, 1.2)))
        elif name.endswith(("input_max", "output_max")):
            b.fill_(float(torch.empty(()).uniform_(0.6, 1.2)))
        elif name.endswith("std_bias"):
            b.copy_(torch.randn_like(b) * 0.5)
        elif name.endswith("std_scale"):
            b.copy_(0.5 + torch.rand_like(b))

shutil.rmtree(OUT, ignore_errors=True)
hf = os.path.join(OUT, "hf")
model.save_pretrained(hf, safe_serialization=True)
os.remove(os.path.join(hf, "generation_config.json"))
cfg = json.load(open(os.path.join(hf, "config.json")))
cfg["text_config"]["global_head_dim"] = 32  # for the converter (transformers keeps it per layer)
json.dump(cfg, open(os.path.join(hf, "config.json"), "w"), indent=1)
proc = Gemma4ImageProcessorPil(patch_size=PATCH, pooling_kernel_size=POOL, max_soft_tokens=SOFT)
proc.save_pretrained(hf)
reloaded = Gemma4ForConditionalGeneration.from_pretrained(hf, attn_implementation="eager").eval()


def f32(name, t):
    a = np.ascontiguousarray(t.detach().float().numpy(), dtype=np.float32)
    a.tofile(os.path.join(OUT, name))
    return list(a.shape)


def processed(pics):
    """The processor's real patches of each image (padding dropped) as exact 8-bit codes, their
    grids, and its batch."""
    out = proc(images=pics, return_tensors="pt")
    codes, grids = [], []
    for i in range(len(pics)):
        pos = out["image_position_ids"][i]
        real = (pos != -1).all(-1)
        pv = out["pixel_values"][i][real].numpy().astype(np.float32)
        c = np.rint(pv.astype(np.float64) * 255).astype(np.int64)
        assert np.array_equal((c / 255.0).astype(np.float32), pv), "not 8-bit codes / 255"
        gw, gh = int(pos[real][:, 0].max()) + 1, int(pos[real][:, 1].max()) + 1
        assert gw * gh == int(real.sum())
        codes.append(c.astype(np.uint8))
        grids.append([gh, gw])
    return out, codes, grids


pics = [image(30, 52, 1), image(44, 40, 2)]
for i, p in enumerate(pics):
    p.save(os.path.join(OUT, f"image{i}.png"))
batch, codes, grids = processed(pics)
np.concatenate(codes).tofile(os.path.join(OUT, "image_codes.u8"))
tokens = [int(n) for n in batch["num_soft_tokens_per_image"]]
assert tokens == [(h // POOL) * (w // POOL) for h, w in grids]

# The images in a prompt as Gemma4Processor lays them out: BOI, the soft tokens, EOI.
ids = [2, 17, 33]
for i, n in enumerate(tokens):
    ids += [BOI] + [IMAGE] * n + [EOI] + ([51, 12, 9] if i == 0 else [44, 50, 7, 49, 3])
mm_types = [1 if t == IMAGE else 0 for t in ids]
with torch.no_grad():
    pv, pos = batch["pixel_values"], batch["image_position_ids"]
    vis = model.model.vision_tower(pixel_values=pv, pixel_position_ids=pos).last_hidden_state
    embeds = torch.cat(model.model.get_image_features(pv, pos).pooler_output)
    args = dict(input_ids=torch.tensor([ids]), pixel_values=pv, image_position_ids=pos)
    out = model(**args, mm_token_type_ids=torch.tensor([mm_types])).logits[0]
    causal = model(**args).logits[0]
    again = reloaded(**args, mm_token_type_ids=torch.tensor([mm_types])).logits[0]
assert torch.equal(out, again), "the saved checkpoint reads back differently"
bidirectional_effect = float((out - causal).abs().max())
assert bidirectional_effect > 1e-3, "the image mask makes no difference"
meta = {
    "description": __doc__.split("\n\n")[0],
    "transformers": __import__("transformers").__version__,
    "image": {
        "prompt_ids": ids, "mm_token_type_ids": mm_types, "boi": BOI, "eoi": EOI,
        "image_token_id": IMAGE, "tokens": tokens, "grids": grids, "patch": PATCH, "pool": POOL,
        "max_soft_tokens": SOFT, "files": ["image0.png", "image1.png"],
        "vision_shape": f32("image_vision.f32", vis),
        "embeds_shape": f32("image_embeds.f32", embeds),
        "logits_shape": f32("ref_logits_image.f32", out),
        "causal_tail_shape": f32("ref_logits_image_causal_tail.f32", causal[-CAUSAL_TAIL:]),
        "max_abs_diff_vs_causal_mask": bidirectional_effect,
    },
}

# The processor over the shared test images.
os.makedirs(os.path.join(OUT, "preprocess"))
meta["preprocess"] = {}
for name in sorted(os.listdir(IMAGES)):
    if name.endswith((".u8", ".json")):
        continue
    _, c, g = processed([Image.open(os.path.join(IMAGES, name))])
    c[0].tofile(os.path.join(OUT, "preprocess", f"{name}.u8"))
    meta["preprocess"][name] = g[0]

convert_mmproj(hf, os.path.join(OUT, "mmproj-f32.gguf"))
json.dump(meta, open(os.path.join(OUT, "meta.json"), "w"), indent=1)
