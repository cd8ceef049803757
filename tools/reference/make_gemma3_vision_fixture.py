#!/usr/bin/env python3
"""Makes tests/fixtures/models/gemma3_vision: a tiny random-init Gemma3ForConditionalGeneration
(text: hidden 64, 2 layers (sliding window 8, then global), vocab 96; vision: a SigLIP of width 32,
2 blocks of MLP width 32, 32 x 32 images in 4 x 4 patches, pooled to 16 tokens) and transformers' float32
reference of it:

  hf/                      the checkpoint as transformers saves it (+ preprocessor_config.json)
  mmproj-f32.gguf          llama.cpp's converter --mmproj --outtype f32 of hf/ (it stores the
                           projection in f16: that weight is made f16-exact here, so both agree)
  ref_logits.f32           a text-only prompt's logits [n][96]; the text-only class
                           (Gemma3ForCausalLM) with the same weights gives the same (checked here)
  image_pixel_values.f32   two images through Gemma3ImageProcessorPil [2][3][32][32]
  image_vision.f32         the vision tower's last_hidden_state (after post_layernorm) [2][64][32]
  image_embeds.f32         the projector's output [2][16][64]
  ref_logits_image.f32     the prompt with both images (token_type_ids given, as the processor
                           does: bidirectional attention within each image) [n][96]
  preprocess/<image>.<size>.u8  tests/fixtures/images through Gemma3ImageProcessorPil at 32: the 8-bit codes [3][size][size] ((code / 255 - 0.5) / 0.5 is HF's
                           value, checked exactly here)
  meta.json                ids, shapes, placeholders

Needs torch, transformers 5.23, pillow, numpy, and llama.cpp's sources (LLAMA_CPP_DIR, for
convert_hf_to_gguf.py and its gguf-py). Run: LLAMA_CPP_DIR=... python3 tools/reference/make_gemma3_vision_fixture.py
"""
import json
import os
import shutil

import numpy as np
import torch
from PIL import Image
from safetensors.torch import load_file, save_file
from transformers import (Gemma3Config, Gemma3ForCausalLM, Gemma3ForConditionalGeneration,
                          Gemma3TextConfig, SiglipVisionConfig)
from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

from vision_fixture import convert_mmproj, image

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(REPO, "tests", "fixtures", "models", "gemma3_vision")
IMAGES = os.path.join(REPO, "tests", "fixtures", "images")
BOI, EOI, IMAGE = 90, 91, 92
TOKENS = 16

torch.manual_seed(3334)
text = Gemma3TextConfig(vocab_size=96, hidden_size=64, intermediate_size=32, num_hidden_layers=2,
                        num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                        query_pre_attn_scalar=16, sliding_window=8,
                        layer_types=["sliding_attention", "full_attention"],
                        max_position_embeddings=256, initializer_range=0.1, pad_token_id=0,
                        bos_token_id=2, eos_token_id=1, tie_word_embeddings=True)
vision = SiglipVisionConfig(hidden_size=32, intermediate_size=32, num_hidden_layers=2,
                            num_attention_heads=2, image_size=32, patch_size=4,
                            vision_use_head=False, layer_norm_eps=1e-6)
config = Gemma3Config(text_config=text.to_dict(), vision_config=vision.to_dict(),
                      mm_tokens_per_image=TOKENS, boi_token_index=BOI, eoi_token_index=EOI,
                      image_token_index=IMAGE, initializer_range=0.1, tie_word_embeddings=True)
config._attn_implementation = "eager"
model = Gemma3ForConditionalGeneration(config).eval()
with torch.no_grad():
    # Norm weights start at 0 (Gemma's 1 + w) or 1 / 0 (SigLIP's LayerNorm): randomised so every
    # weight matters; the projection made f16-exact (the converter stores it in f16).
    for name, p in model.named_parameters():
        if "norm" in name:
            p.add_(torch.randn_like(p) * 0.2)
    w = model.model.multi_modal_projector.mm_input_projection_weight
    w.copy_(torch.randn_like(w) * 0.15)
    w.copy_(w.half().float())

shutil.rmtree(OUT, ignore_errors=True)
hf = os.path.join(OUT, "hf")
model.save_pretrained(hf, safe_serialization=True)
# transformers 5.23 writes the vision tower as vision_tower.*, the official checkpoints (and
# llama.cpp's converter) as vision_tower.vision_model.*: the fixture takes the official names, and
# transformers reads them back to the same model (checked below).
st = os.path.join(hf, "model.safetensors")
tensors = {(k.replace("vision_tower.", "vision_tower.vision_model.", 1)
            if k.startswith("vision_tower.") else k): v for k, v in load_file(st).items()}
save_file(tensors, st, metadata={"format": "pt"})
reloaded = Gemma3ForConditionalGeneration.from_pretrained(hf, attn_implementation="eager").eval()
proc = Gemma3ImageProcessorPil(size={"height": 32, "width": 32}, image_mean=[0.5, 0.5, 0.5],
                               image_std=[0.5, 0.5, 0.5])
proc.save_pretrained(hf)
os.remove(os.path.join(hf, "generation_config.json"))
pre = json.load(open(os.path.join(hf, "preprocessor_config.json")))
pre["image_seq_length"] = TOKENS
json.dump(pre, open(os.path.join(hf, "preprocessor_config.json"), "w"), indent=1)


def f32(name, t):
    a = np.ascontiguousarray(t.detach().float().numpy(), dtype=np.float32)
    a.tofile(os.path.join(OUT, name))
    return list(a.shape)


# The text-only prompt, and the same decoder as the text-only class.
ids = torch.tensor([[2, 17, 93, 40, 5, 77, 71, 33, 61, 12, 9, 80, 44, 60, 7, 59, 3, 50]])
with torch.no_grad():
    logits = model(input_ids=ids).logits[0]
    lm = Gemma3ForCausalLM(config.text_config).eval()
    lm.model.load_state_dict(model.model.language_model.state_dict())
    lm.lm_head.load_state_dict(model.lm_head.state_dict())
    text_only = lm(input_ids=ids).logits[0]
    again = reloaded(input_ids=ids).logits[0]
assert torch.equal(logits, text_only), "the text-only class differs"
assert torch.equal(logits, again), "the checkpoint with the official names reads back differently"
f32("ref_logits.f32", logits)

# Two images in one prompt, as Gemma 3's chat template lays them out: BOI, 16 image tokens, EOI.
pics = [image(24, 34, 1), image(30, 20, 2)]
for i, p in enumerate(pics):
    p.save(os.path.join(OUT, f"image{i}.png"))
pixel_values = torch.tensor(np.asarray(proc(images=pics, return_tensors="np")["pixel_values"]))
block = [BOI] + [IMAGE] * TOKENS + [EOI]
image_ids = [2, 17, 93, 40] + block + [61, 12, 9] + block + [44, 60, 7, 59, 3]
token_type_ids = [1 if t == IMAGE else 0 for t in image_ids]
with torch.no_grad():
    vis = model.model.vision_tower(pixel_values=pixel_values).last_hidden_state
    embeds = model.model.multi_modal_projector(vis)
    out = model(input_ids=torch.tensor([image_ids]), pixel_values=pixel_values,
                token_type_ids=torch.tensor([token_type_ids])).logits[0]
    causal = model(input_ids=torch.tensor([image_ids]), pixel_values=pixel_values).logits[0]
bidirectional_effect = float((out - causal).abs().max())
assert bidirectional_effect > 1e-3, "the image mask makes no difference"
meta = {
    "description": __doc__.split("\n\n")[0],
    "transformers": __import__("transformers").__version__,
    "prompt_ids": ids[0].tolist(),
    "logits_shape": list(logits.shape),
    "image": {
        "prompt_ids": image_ids, "token_type_ids": token_type_ids,
        "boi": BOI, "eoi": EOI, "image_token_id": IMAGE, "tokens_per_image": TOKENS,
        "files": ["image0.png", "image1.png"],
        "pixel_values_shape": f32("image_pixel_values.f32", pixel_values),
        "vision_shape": f32("image_vision.f32", vis),
        "embeds_shape": f32("image_embeds.f32", embeds),
        "logits_shape": f32("ref_logits_image.f32", out),
        "max_abs_diff_vs_causal_mask": bidirectional_effect,
    },
}

# The processor over the shared test images, at two sizes.
os.makedirs(os.path.join(OUT, "preprocess"))
for name in sorted(os.listdir(IMAGES)):
    if name.endswith((".u8", ".json")):
        continue
    for size in (32,):
        p = Gemma3ImageProcessorPil(size={"height": size, "width": size},
                                    image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
        pv = np.asarray(p(images=[Image.open(os.path.join(IMAGES, name))],
                          return_tensors="np")["pixel_values"][0], dtype=np.float32)
        codes = np.rint((pv.astype(np.float64) * 0.5 + 0.5) * 255).astype(np.int64)
        assert np.array_equal(((codes / 255.0).astype(np.float32) - 0.5) / np.float32(0.5), pv)
        codes.astype(np.uint8).tofile(os.path.join(OUT, "preprocess", f"{name}.{size}.u8"))
meta["preprocess"] = {"processor": "Gemma3ImageProcessorPil (bilinear)", "sizes": [32]}

convert_mmproj(hf, os.path.join(OUT, "mmproj-f32.gguf"))
json.dump(meta, open(os.path.join(OUT, "meta.json"), "w"), indent=1)
