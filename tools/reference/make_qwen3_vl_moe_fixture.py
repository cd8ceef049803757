#!/usr/bin/env python3
"""Makes tests/fixtures/models/qwen3_vl_moe: a tiny random-init Qwen3VLMoeForConditionalGeneration
(text: hidden 64, 2 layers, GQA 4 / 2 heads of 16 with per-head q/k norm, interleaved M-RoPE
mrope_section [3, 3, 2] over the 8 frequency pairs, 8 routed experts of width 8 in every layer,
top-2, tied embeddings, a 64-entry byte-level BPE vocabulary; vision: width 16, MLP 32, 3 blocks,
4 x 4 patches, 2 x 2 merge to 64, DeepStack taps after blocks 0 and 1) in bfloat16, as the released
checkpoints are, and transformers' float32 reference of it:

  hf/                      config.json, model.safetensors (bfloat16; each layer's experts as the
                           released checkpoints store them: mlp.experts.gate_up_proj
                           [E][hidden][2 ff], gate columns then up columns, and
                           mlp.experts.down_proj [E][ff][hidden], which transformers transposes on
                           load and llama.cpp's converter expects), preprocessor_config.json,
                           tokenizer files
  model-f32.gguf           llama.cpp's convert_hf_to_gguf.py --outtype f32 of hf/ (qwen3vlmoe; the
                           tiny vocabulary's pre-tokenizer hash is unknown to it: told "qwen2")
  mmproj-f32.gguf          the same with --mmproj (qwen3vl_merger)
  ref_logits.f32           the text prompt [24][64]: HF float32 (the bf16 weights widened), eager
                           attention, one forward pass
  image.png                a 24 x 40 synthetic image: 6 x 10 patches, 3 x 5 = 15 image tokens
  image_pixel_values.f32   its pixel values from Qwen2VLImageProcessorPil [60][3 * 2 * 4 * 4]
  image_embeds.f32         the vision tower's merged output [15][64]
  image_deepstack.f32      its DeepStack features [2][15][64]
  ref_logits_image.f32     the image prompt (meta.json's image.prompt_ids: text, vision_start, 15 x
                           image_pad, vision_end, text) [33][64]
  meta.json                prompt ids, config, the image prompt's 3-D positions and grid, routing
                           margins, HF prefill vs decode

Needs torch, transformers 5.23, tokenizers, pillow, numpy and llama.cpp's sources (LLAMA_CPP_DIR:
convert_hf_to_gguf.py and its gguf-py). Run:
  LLAMA_CPP_DIR=... python3 tools/reference/make_qwen3_vl_moe_fixture.py
"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file
from transformers import (Qwen2VLImageProcessorPil, Qwen3VLMoeConfig,
                          Qwen3VLMoeForConditionalGeneration)

from bpe_fixture import convert_text, make_tokenizer
from vision_fixture import convert_mmproj, image

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(REPO, "tests", "fixtures", "models", "qwen3_vl_moe")
PROMPT = ("The quick brown fox jumps over the lazy dog, and on 12 March 1961 the "
          "committee said it would \"review\" every plan before the election.")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
            "<|image_pad|>", "<|video_pad|>"]
VOCAB, N_PROMPT, TEXT_BEFORE, TEXT_AFTER = 64, 24, 6, 10
IMAGE_HW, PATCH, MERGE = (24, 40), 4, 2


def config(tok):
    ids = {k: tok.convert_tokens_to_ids(t) for k, t in
           [("vision_start_token_id", "<|vision_start|>"), ("vision_end_token_id", "<|vision_end|>"),
            ("image_token_id", "<|image_pad|>"), ("video_token_id", "<|video_pad|>")]}
    text = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=32, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
                rope_parameters={"rope_type": "default", "rope_theta": 5e6, "mrope_section": [3, 3, 2],
                                 "mrope_interleaved": True},
                moe_intermediate_size=8, num_experts=8, num_experts_per_tok=2,
                max_position_embeddings=256, initializer_range=0.1, tie_word_embeddings=True,
                bos_token_id=None, eos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"))
    vision = dict(depth=3, hidden_size=16, intermediate_size=32, num_heads=2, patch_size=PATCH,
                  temporal_patch_size=2, spatial_merge_size=MERGE, out_hidden_size=64,
                  num_position_embeddings=16, deepstack_visual_indexes=[0, 1],
                  hidden_act="gelu_pytorch_tanh", initializer_range=0.1)
    cfg = Qwen3VLMoeConfig(text_config=text, vision_config=vision, tie_word_embeddings=True, **ids)
    cfg.initializer_range = 0.1
    return cfg


def randomize_constants(model, gen):
    """Re-draws every float parameter whose elements are all equal (HF inits 0 or 1)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            flat = p.reshape(-1)
            if flat.numel() > 1 and not bool((flat == flat[0]).all()):
                continue
            a = 0.4 if "norm" in name else 0.2
            p.copy_(float(flat[0]) + (torch.rand(p.shape, generator=gen) * 2 - 1) * a)


def to_bf16_values(model):
    """The weights rounded to bfloat16 (kept float32): the checkpoint's exact values."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.bfloat16().float())


def routing_margins(model, runs):
    """The smallest gap, in router logits, between the k-th and the (k+1)-th expert of any token
    in any MoE layer over the given forward passes (kwargs each)."""
    margins = []

    def hook(mod, args, out):
        top = out[0].double().topk(mod.top_k + 1, dim=-1).values
        margins.append(float((top[:, -2] - top[:, -1]).min()))

    routers = [m for m in model.modules() if type(m).__name__ == "Qwen3VLMoeTextTopKRouter"]
    hs = [r.register_forward_hook(hook) for r in routers]
    with torch.no_grad():
        for kw in runs:
            model.model.rope_deltas = None
            model(**kw)
    for h in hs:
        h.remove()
    return min(margins)


def save_released_layout(model, hf):
    """model.safetensors in bfloat16 with the experts transposed as the released checkpoints hold
    them (transformers' save would write its own layout, which llama.cpp's converter misreads)."""
    sd = {}
    for k, v in model.state_dict().items():
        if k == "lm_head.weight":  # tied to the embeddings
            continue
        if k.endswith(("mlp.experts.gate_up_proj", "mlp.experts.down_proj")):
            v = v.transpose(1, 2)
        sd[k] = v.bfloat16().contiguous()
    save_file(sd, os.path.join(hf, "model.safetensors"), metadata={"format": "pt"})


def f32(name, t):
    a = np.ascontiguousarray(t.detach().float().numpy(), dtype="<f4")
    a.tofile(os.path.join(OUT, name))
    return list(a.shape)


def logits(model, **kw):
    model.model.rope_deltas = None
    with torch.no_grad():
        return model(**kw).logits[0].float()


def prefill_vs_decode(model, ids, ref, head, first_kw):
    """ids[:head] in one call (with first_kw), then one token a call through HF's cache."""
    model.model.rope_deltas = None
    with torch.no_grad():
        out = model(input_ids=ids[:, :head], use_cache=True, **first_kw)
        rows = [out.logits[0]]
        for t in range(head, ids.shape[1]):
            out = model(input_ids=ids[:, t:t + 1], past_key_values=out.past_key_values, use_cache=True)
            rows.append(out.logits[0])
    return float((torch.cat(rows).double() - ref.double()).abs().max() / ref.abs().max())


def main():
    llama = os.environ.get("LLAMA_CPP_DIR")
    if not llama:
        sys.exit("LLAMA_CPP_DIR: llama.cpp's source folder (convert_hf_to_gguf.py)")
    torch.set_num_threads(2)
    shutil.rmtree(OUT, ignore_errors=True)
    hf = os.path.join(OUT, "hf")
    os.makedirs(hf)
    tok = make_tokenizer(hf, PROMPT, SPECIALS, VOCAB)
    cfg = config(tok)
    text_ids = tok.encode(PROMPT)[:N_PROMPT]
    assert len(text_ids) == N_PROMPT and max(text_ids) < VOCAB

    proc = Qwen2VLImageProcessorPil(patch_size=PATCH, temporal_patch_size=2, merge_size=MERGE,
                                    image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
                                    size={"shortest_edge": 64, "longest_edge": 4096})
    pic = image(IMAGE_HW[0], IMAGE_HW[1], 7)
    pic.save(os.path.join(OUT, "image.png"))
    batch = proc(images=[Image.open(os.path.join(OUT, "image.png")).convert("RGB")], return_tensors="pt")
    pv, grid = batch["pixel_values"].float(), batch["image_grid_thw"]
    n_img = int(grid.prod(-1).sum()) // (MERGE * MERGE)
    image_ids = (text_ids[:TEXT_BEFORE] + [cfg.vision_start_token_id] + [cfg.image_token_id] * n_img
                 + [cfg.vision_end_token_id] + text_ids[TEXT_BEFORE:TEXT_BEFORE + TEXT_AFTER])
    mm = torch.tensor([[1 if t == cfg.image_token_id else 0 for t in image_ids]], dtype=torch.int32)
    ids, iids = torch.tensor([text_ids]), torch.tensor([image_ids])
    image_kw = dict(input_ids=iids, pixel_values=pv, image_grid_thw=grid, mm_token_type_ids=mm)

    seed = 3407
    while True:
        torch.manual_seed(seed)
        model = Qwen3VLMoeForConditionalGeneration._from_config(
            cfg, attn_implementation="eager", dtype=torch.float32).eval()
        randomize_constants(model, torch.Generator().manual_seed(seed + 7))
        to_bf16_values(model)
        margin = routing_margins(model, [dict(input_ids=ids), image_kw])
        if margin > 1e-3:
            break
        seed += 1

    in_memory = logits(model, input_ids=ids)
    save_released_layout(model, hf)
    model.config.dtype = "bfloat16"
    model.config.architectures = ["Qwen3VLMoeForConditionalGeneration"]
    model.config.save_pretrained(hf)
    proc.save_pretrained(hf)
    # The references come from what is on disk, read back in float32.
    model = Qwen3VLMoeForConditionalGeneration.from_pretrained(
        hf, dtype=torch.float32, attn_implementation="eager").eval()
    ref = logits(model, input_ids=ids)
    assert torch.equal(ref, in_memory), "the saved checkpoint reads back differently"
    ref_image = logits(model, **image_kw)
    model.model.rope_deltas = None
    pos, delta = model.model.get_rope_index(iids, mm_token_type_ids=mm, image_grid_thw=grid)
    with torch.no_grad():
        vo = model.model.get_image_features(pv, grid, return_dict=True)
    embeds = torch.cat(vo.pooler_output, 0)
    deepstack = torch.stack([torch.cat(f, 0) for f in vo.deepstack_features], 0)
    head = TEXT_BEFORE + n_img + 2
    meta = {
        "description": __doc__.split("\n\n")[0],
        "transformers": __import__("transformers").__version__,
        "seed": seed,
        "config": json.load(open(os.path.join(hf, "config.json"))),
        "prompt_ids": text_ids,
        "logits_shape": f32("ref_logits.f32", ref),
        "reference_top1": [int(x) for x in ref.argmax(-1)],
        "routing_min_margin": routing_margins(model, [dict(input_ids=ids), image_kw]),
        "hf_prefill_vs_decode_rel": prefill_vs_decode(model, ids, ref, 1, {}),
        "image": {
            "prompt_ids": image_ids,
            "mm_token_type_ids": mm[0].tolist(),
            "position_ids_thw": pos[:, 0].tolist(),
            "rope_delta": int(delta.reshape(-1)[0]),
            "image_hw": list(IMAGE_HW),
            "image_grid_thw": grid.tolist(),
            "n_image_tokens": n_img,
            "pixel_values_shape": f32("image_pixel_values.f32", pv),
            "embeds_shape": f32("image_embeds.f32", embeds),
            "deepstack_shape": f32("image_deepstack.f32", deepstack),
            "logits_shape": f32("ref_logits_image.f32", ref_image),
            "reference_top1": [int(x) for x in ref_image.argmax(-1)],
            "hf_prefill_through_vision_end_vs_decode_rel": prefill_vs_decode(
                model, iids, ref_image, head,
                dict(pixel_values=pv, image_grid_thw=grid, mm_token_type_ids=mm[:, :head])),
        },
    }
    with tempfile.TemporaryDirectory() as tmp:
        convert_text(llama, hf, os.path.join(tmp, "model-f32.gguf"), "qwen2")
        shutil.move(os.path.join(tmp, "model-f32.gguf"), os.path.join(OUT, "model-f32.gguf"))
    convert_mmproj(hf, os.path.join(OUT, "mmproj-f32.gguf"))
    with open(os.path.join(OUT, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps({k: meta[k] for k in ("seed", "routing_min_margin", "hf_prefill_vs_decode_rel")}))


if __name__ == "__main__":
    main()
