#!/usr/bin/env python3
"""The glm4_moe fixture (tests/fixtures/models/glm4_moe) and its FP8 form (glm4_moe_fp8).

    make_glm4_moe_fixture.py --converter LLAMA_CPP_DIR --out FIXTURES_MODELS_DIR [--seed N]

A random-init, seeded Glm4MoeForCausalLM in float32 (transformers 5.x, torch): hidden 64, 2
layers (layer 0 dense, layer 1 routed experts beside a shared expert), GQA 4 query / 2 kv heads of
16 with q/k/v biases, per-head q/k norm and partial rotary 0.5, sigmoid routing with a random
e_score_correction_bias, 8 experts in 2 groups (topk_group 1, top-2), routed_scaling_factor 2.5,
and one multi-token-prediction layer (num_nextn_predict_layers 1, model.layers.2: a MoE decoder
layer plus eh_proj / enorm / hnorm / shared_head.norm) that transformers ignores. The vocabulary is
a 64-entry byte-level BPE trained on the prompt, with GLM's special tokens.

glm4_moe/ gets
  hf/                config.json, model.safetensors (the MTP layer left out), tokenizer files
  model-f32.gguf     llama.cpp's convert_hf_to_gguf.py of the whole checkpoint (MTP layer included,
                     block_count 3, nextn_predict_layers 1); the pre-tokenizer hash of the tiny
                     vocabulary is unknown to it, so it is told "glm4" (GLM-4.5's)
  ref_logits.f32     float32 [tokens][vocab]: HF float32, eager attention, one forward pass
  meta.json          prompt ids, config, routing statistics, HF prefill vs decode
glm4_moe_fp8/ gets
  hf/                the same checkpoint as DeepSeek's FP8 releases store it: every linear weight
                     but the router and lm_head as float8_e4m3fn with weight_scale_inv (float32,
                     one per 128 x 128 block: scale = amax / 448, value = fp8(w / scale)), the
                     rest bfloat16 (the correction bias float32), quantization_config fp8 [128, 128]
  ref_logits_fp8.f32 HF float32 logits of the model whose weights are the dequantised FP8 (and
                     the bf16-rounded) values
  meta.json          as above
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "reference"))
from bpe_fixture import convert_text, make_tokenizer  # noqa: E402

PROMPT = ("The quick brown fox jumps over the lazy dog, and on 12 March 1961 the "
          "committee said it would \"review\" every plan before the election.")
SPECIALS = ["<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>",
            "<|user|>", "<|assistant|>", "<|observation|>"]
VOCAB = 64
N_PROMPT = 24
BLOCK = 128


def config(vocab):
    from transformers import Glm4MoeConfig
    return Glm4MoeConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=16, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 0.5},
        attention_bias=True, use_qk_norm=True, moe_intermediate_size=8, num_experts_per_tok=2,
        n_shared_experts=1, n_routed_experts=8, routed_scaling_factor=2.5, n_group=2, topk_group=1,
        first_k_dense_replace=1, norm_topk_prob=True, tie_word_embeddings=False,
        max_position_embeddings=256, initializer_range=0.1, bos_token_id=None, eos_token_id=None,
        pad_token_id=None)


def randomize_constants(model, gen):
    """Re-draw every float parameter/buffer whose elements are all equal (HF inits 0 or 1)."""
    with torch.no_grad():
        for name, p in list(model.named_parameters()) + list(model.named_buffers()):
            if not torch.is_floating_point(p) or "inv_freq" in name:
                continue
            flat = p.reshape(-1)
            if flat.numel() > 1 and not bool((flat == flat[0]).all()):
                continue
            a = 0.4 if "norm" in name else 0.2
            noise = (torch.rand(p.shape, generator=gen, dtype=torch.float64) * 2 - 1) * a
            p.copy_((float(flat[0]) + noise).to(p.dtype))


def routing_stats(model, ids):
    """Per MoE layer: the smallest margin of any top-k (or kept-group) decision, and on how many
    tokens the choice differs from plain softmax top-k and from the choice without groups."""
    out = []

    def hook(mod, args, res):
        logits = res[0].double()
        s0 = torch.sigmoid(logits) + mod.e_score_correction_bias.double()
        E, G, tg, k = mod.num_experts, mod.num_group, mod.topk_group, mod.top_k
        gs = s0.view(-1, G, E // G).topk(2, dim=-1)[0].sum(-1)
        gt = gs.topk(tg + 1, dim=-1).values
        gmask = torch.zeros_like(gs).scatter_(1, gs.topk(tg, dim=-1).indices, 1).bool()
        s = s0.masked_fill(~gmask.unsqueeze(-1).expand(-1, G, E // G).reshape(-1, E), float("-inf"))
        top = s.topk(k + 1, dim=-1).values
        marg = (top[:, k - 1] - top[:, k])
        chosen = s.topk(k, dim=-1).indices.sort(-1).values
        softmax = torch.softmax(logits, -1).topk(k, dim=-1).indices.sort(-1).values
        free = s0.topk(k, dim=-1).indices.sort(-1).values
        out.append({
            "min_margin": float(min(marg[torch.isfinite(marg)].min(), (gt[:, tg - 1] - gt[:, tg]).min())),
            "tokens_differing_from_softmax_topk": int((chosen != softmax).any(-1).sum()),
            "tokens_where_group_limit_changes_choice": int((chosen != free).any(-1).sum()),
        })

    hs = [m.register_forward_hook(hook) for m in model.modules() if type(m).__name__ == "Glm4MoeTopkRouter"]
    with torch.no_grad():
        model(ids)
    for h in hs:
        h.remove()
    return out


def decode_compare(model, ids, ref):
    rows = []
    with torch.no_grad():
        out = model(input_ids=ids[:, :1], use_cache=True)
        rows.append(out.logits[0])
        for t in range(1, ids.shape[1]):
            out = model(input_ids=ids[:, t:t + 1], past_key_values=out.past_key_values, use_cache=True)
            rows.append(out.logits[0])
    d = (torch.cat(rows, 0).double() - ref.double()).abs().max()
    return float(d / ref.abs().max())


def logits_of(model, ids):
    with torch.no_grad():
        return model(ids).logits[0].float().contiguous()


def write_f32(path, t):
    t.numpy().astype("<f4").tofile(path)


def mtp_tensors(full_sd, layer, gen):
    """The MTP layer as GLM's checkpoints hold it: a decoder layer plus its own projections."""
    p = "model.layers.%d." % layer
    sd = {k: v for k, v in full_sd.items() if k.startswith(p)}
    n = 64
    sd[p + "eh_proj.weight"] = torch.randn(n, 2 * n, generator=gen) * 0.1
    for name in ("enorm", "hnorm", "shared_head.norm"):
        sd[p + name + ".weight"] = 1 + (torch.rand(n, generator=gen) * 2 - 1) * 0.4
    return sd


def fp8_quantise(w):
    """DeepSeek's weight_quant: per 128 x 128 block scale = amax / 448, value = e4m3(w / scale).
    Returns (fp8 weight, float32 scale_inv [ceil(rows/128), ceil(cols/128)], dequantised f32)."""
    R, C = w.shape
    br, bc = -(-R // BLOCK), -(-C // BLOCK)
    scale = torch.zeros(br, bc, dtype=torch.float32)
    q = torch.zeros(R, C, dtype=torch.float8_e4m3fn)
    for i in range(br):
        for j in range(bc):
            blk = w[i * BLOCK:(i + 1) * BLOCK, j * BLOCK:(j + 1) * BLOCK].float()
            s = blk.abs().max().clamp_min(1e-12) / 448.0
            scale[i, j] = s
            q[i * BLOCK:(i + 1) * BLOCK, j * BLOCK:(j + 1) * BLOCK] = (blk / s).to(torch.float8_e4m3fn)
    deq = q.float() * scale.repeat_interleave(BLOCK, 0)[:R].repeat_interleave(BLOCK, 1)[:, :C]
    return q, scale, deq


def is_fp8_linear(name):
    # DeepSeek-V3 / GLM FP8 releases: every nn.Linear of the decoder layers but the router.
    return (name.startswith("model.layers.") and name.endswith("_proj.weight")
            and ".mlp.gate." not in name)


def make_fp8(src_dir, fdir, prompt_ids):
    from safetensors.torch import load_file, save_file
    from transformers import Glm4MoeForCausalLM
    hf = os.path.join(fdir, "hf")
    os.makedirs(hf)
    sd = load_file(os.path.join(src_dir, "model.safetensors"))
    out, deq = {}, {}
    for k, v in sd.items():
        if is_fp8_linear(k):
            q, s, d = fp8_quantise(v)
            out[k], out[k + "_scale_inv"] = q, s
            deq[k] = d
        elif k.endswith("e_score_correction_bias"):
            out[k] = v
        else:
            out[k] = v.to(torch.bfloat16)
            deq[k] = out[k].float()
    save_file(out, os.path.join(hf, "model.safetensors"), metadata={"format": "pt"})
    cj = json.load(open(os.path.join(src_dir, "config.json")))
    cj["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                 "weight_block_size": [BLOCK, BLOCK]}
    with open(os.path.join(hf, "config.json"), "w") as f:
        json.dump(cj, f, indent=1)
    model = Glm4MoeForCausalLM.from_pretrained(src_dir, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        for k, d in deq.items():
            if ".mlp.experts." not in k:
                model.get_parameter(k).copy_(d)
        # transformers holds the routed experts fused: gate_up_proj [E][2 ff][in], down_proj [E][in][ff].
        for l, layer in enumerate(model.model.layers):
            ex = getattr(layer.mlp, "experts", None)
            if ex is None:
                continue
            for e in range(ex.gate_up_proj.shape[0]):
                p = "model.layers.%d.mlp.experts.%d." % (l, e)
                ex.gate_up_proj[e].copy_(torch.cat([deq[p + "gate_proj.weight"], deq[p + "up_proj.weight"]], 0))
                ex.down_proj[e].copy_(deq[p + "down_proj.weight"])
    ids = torch.tensor([prompt_ids])
    ref = logits_of(model, ids)
    write_f32(os.path.join(fdir, "ref_logits_fp8.f32"), ref)
    meta = {"prompt_ids": prompt_ids, "logits_shape": list(ref.shape),
            "derived_from": "glm4_moe (same weights, linear weights FP8 e4m3 per 128x128 block)",
            "reference_top1": [int(x) for x in ref.argmax(-1)],
            "max_abs_ref": float(ref.abs().max()), "hf_prefill_vs_decode_rel": decode_compare(model, ids, ref)}
    with open(os.path.join(fdir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--converter", required=True, help="llama.cpp checkout (convert_hf_to_gguf.py)")
    ap.add_argument("--out", required=True, help="fixtures/models directory")
    ap.add_argument("--seed", type=int, default=3036)
    a = ap.parse_args()
    from safetensors.torch import load_file, save_file
    from transformers import Glm4MoeForCausalLM
    torch.set_num_threads(2)
    fdir = os.path.join(a.out, "glm4_moe")
    for d in (fdir, fdir + "_fp8"):
        if os.path.isdir(d):
            shutil.rmtree(d)
    hf = os.path.join(fdir, "hf")
    os.makedirs(hf)
    with tempfile.TemporaryDirectory() as tmp:
        full = os.path.join(tmp, "full")
        tok = make_tokenizer(full, PROMPT, SPECIALS, VOCAB)
        prompt_ids = [tok.convert_tokens_to_ids("[gMASK]")] + tok.encode(PROMPT)[:N_PROMPT - 1]
        ids = torch.tensor([prompt_ids])
        seed = a.seed
        while True:
            torch.manual_seed(seed)
            cfg = config(VOCAB)
            model = Glm4MoeForCausalLM(cfg).float().eval()
            randomize_constants(model, torch.Generator().manual_seed(seed + 7))
            model.config.num_hidden_layers = 2
            stats = routing_stats(model, ids)
            if min(s["min_margin"] for s in stats) > 1e-3 and all(
                    s["tokens_differing_from_softmax_topk"] > 0 and s["tokens_where_group_limit_changes_choice"] > 0
                    for s in stats):
                break
            seed += 1
        model.config.num_hidden_layers = 3
        model.save_pretrained(full)
        sd = load_file(os.path.join(full, "model.safetensors"))
        gen = torch.Generator().manual_seed(seed + 11)
        mtp = mtp_tensors(sd, 2, gen)
        main_sd = {k: v for k, v in sd.items() if k not in mtp}
        save_file({**main_sd, **mtp}, os.path.join(full, "model.safetensors"), metadata={"format": "pt"})
        cj = json.load(open(os.path.join(full, "config.json")))
        cj["num_hidden_layers"] = 2
        cj["num_nextn_predict_layers"] = 1
        with open(os.path.join(full, "config.json"), "w") as f:
            json.dump(cj, f, indent=1)
        convert_text(a.converter, full, os.path.join(fdir, "model-f32.gguf"), "glm4")
        for fn in os.listdir(full):
            if fn not in ("model.safetensors", "generation_config.json"):
                shutil.copy(os.path.join(full, fn), hf)
        save_file(main_sd, os.path.join(hf, "model.safetensors"), metadata={"format": "pt"})
    model = Glm4MoeForCausalLM.from_pretrained(hf, dtype=torch.float32, attn_implementation="eager").eval()
    ref = logits_of(model, ids)
    write_f32(os.path.join(fdir, "ref_logits.f32"), ref)
    meta = {"seed": seed, "prompt_ids": prompt_ids, "logits_shape": list(ref.shape), "config": cj,
            "routing": routing_stats(model, ids), "reference_top1": [int(x) for x in ref.argmax(-1)],
            "max_abs_ref": float(ref.abs().max()), "hf_prefill_vs_decode_rel": decode_compare(model, ids, ref),
            "mtp": "model.layers.2 (num_nextn_predict_layers 1) is in the GGUF only (blk.2, nextn.*)"}
    with open(os.path.join(fdir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    make_fp8(hf, fdir + "_fp8", prompt_ids)
    print(json.dumps({k: meta[k] for k in ("seed", "routing", "max_abs_ref", "hf_prefill_vs_decode_rel")}))


if __name__ == "__main__":
    main()
