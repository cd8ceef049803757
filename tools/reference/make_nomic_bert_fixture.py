#!/usr/bin/env python3
"""A tiny nomic-bert sentence-embedding fixture (nomic-embed-text v1 / v1.5's architecture) and its
references.

usage: make_nomic_bert_fixture.py --converter LLAMA_CPP_DIR --tokenizer BERT_HF_DIR --out DIR

DIR/hf/      a random-init NomicBertModel (hidden 32, 2 layers, 4 heads, SwiGLU FFN of 64, rotary
             base 1000, 2 token types, no biases but the LayerNorms') saved as nomic-ai ships it:
             its own config keys (n_embd, n_head, rotary_emb_base, ...) and tensor names
             (encoder.layers.N.attn.Wqkv, mlp.fc11 / fc12 / fc2, norm1 / norm2, emb_ln), the
             WordPiece tokenizer of BERT_HF_DIR (the bert_embedding fixture's), and the modules
             Transformer, Pooling (mean) and Normalize (st_fixture.py).
DIR/model-f32.gguf   llama.cpp's convert_hf_to_gguf.py of hf/ (arch nomic-bert, pooling_type 1).
DIR/ref.json         {"inputs", "ids", "embeddings", "cls"}: each input's ids (BERT_HF_DIR's
                     tokenizer), its mean-pooled, L2-normalised final hidden states from
                     transformers' NomicBertModel (float32, CPU) and its unnormalised first-token
                     state (cls pooling).
transformers reads nomic-ai's tensor names through its own conversion mapping but not nomic-ai's
config keys: the layout written here is checked by loading it with transformers' keys beside it
and comparing the hidden states.
"""
import argparse
import json
import os
import shutil
import tempfile

import numpy as np
import torch

from make_bert_fixture import INPUTS  # the BERT fixture's texts, through its tokenizer too
from st_fixture import convert, write_st_modules

HIDDEN, LAYERS, HEADS, INNER, THETA = 32, 2, 4, 64, 1000.0


def nomic_config(vocab, pad):
    """config.json as nomic-embed-text-v1.5 ships it (its remote-code keys), at the fixture's
    size. llama.cpp's converter reads these and checks the ones fixed by the architecture."""
    return {
        "activation_function": "swiglu", "architectures": ["NomicBertModel"], "attn_pdrop": 0.0,
        "bos_token_id": None, "causal": False, "dense_seq_output": True, "embd_pdrop": 0.0,
        "eos_token_id": None, "initializer_range": 0.02, "layer_norm_epsilon": 1e-12,
        "max_trained_positions": 2048, "mlp_fc1_bias": False, "mlp_fc2_bias": False,
        "model_type": "nomic_bert", "n_embd": HIDDEN, "n_head": HEADS, "n_inner": INNER,
        "n_layer": LAYERS, "n_positions": 8192, "pad_token_id": pad, "prenorm": False,
        "qkv_proj_bias": False, "rotary_emb_base": THETA, "rotary_emb_fraction": 1.0,
        "rotary_emb_interleaved": False, "rotary_emb_scale_base": None,
        "rotary_scaling_factor": None, "torch_dtype": "float32", "type_vocab_size": 2,
        "use_rms_norm": False, "vocab_size": vocab,
    }


def transformers_config(vocab, pad):
    from transformers import NomicBertConfig

    return NomicBertConfig(vocab_size=vocab, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                           num_attention_heads=HEADS, intermediate_size=INNER,
                           max_position_embeddings=2048, type_vocab_size=2, layer_norm_eps=1e-12,
                           pad_token_id=pad, hidden_act="silu",
                           rope_parameters={"rope_type": "default", "rope_theta": THETA})


def random_model(cfg):
    from transformers import NomicBertModel

    torch.manual_seed(4021)
    model = NomicBertModel(cfg).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layernorm.weight" in name.lower():  # initialised to ones: drawn so they matter
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(0.3 * torch.randn_like(p))
    return model


def nomic_state(model):
    """transformers' state dict under nomic-ai's names: q, k, v stacked as Wqkv; fc11 is the up
    projection and fc12 the gate (transformers' conversion mapping says the same)."""
    sd, out = model.state_dict(), {}
    out["embeddings.word_embeddings.weight"] = sd["embeddings.word_embeddings.weight"]
    out["embeddings.token_type_embeddings.weight"] = sd["embeddings.token_type_embeddings.weight"]
    out["emb_ln.weight"] = sd["embeddings.LayerNorm.weight"]
    out["emb_ln.bias"] = sd["embeddings.LayerNorm.bias"]
    for i in range(LAYERS):
        src, dst = f"layers.{i}.", f"encoder.layers.{i}."
        out[dst + "attn.Wqkv.weight"] = torch.cat(
            [sd[src + f"self_attn.{p}_proj.weight"] for p in "qkv"], dim=0)
        out[dst + "attn.out_proj.weight"] = sd[src + "self_attn.o_proj.weight"]
        out[dst + "mlp.fc11.weight"] = sd[src + "mlp.up_proj.weight"]
        out[dst + "mlp.fc12.weight"] = sd[src + "mlp.gate_proj.weight"]
        out[dst + "mlp.fc2.weight"] = sd[src + "mlp.down_proj.weight"]
        for norm, name in (("norm1", "post_attention_layernorm"), ("norm2", "post_mlp_layernorm")):
            out[dst + norm + ".weight"] = sd[src + name + ".weight"]
            out[dst + norm + ".bias"] = sd[src + name + ".bias"]
    return {k: v.contiguous() for k, v in out.items()}


def check_layout(cfg, state, model, ids):
    """nomic-ai's names loaded by transformers (its conversion mapping) give the model's states."""
    from safetensors.torch import save_file
    from transformers import AutoModel

    with tempfile.TemporaryDirectory() as d:
        cfg.save_pretrained(d)
        save_file(state, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        loaded = AutoModel.from_pretrained(d, dtype=torch.float32).eval()
    with torch.no_grad():
        a = model(torch.tensor([ids])).last_hidden_state
        b = loaded(torch.tensor([ids])).last_hidden_state
    assert torch.equal(a, b), float((a - b).abs().max())


def floats(v):
    return [float(np.float32(x)) for x in v]


def references(hf_dir, model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(hf_dir)
    ids, emb, cls = [], [], []
    for text in INPUTS:
        t = tok(text)["input_ids"]
        ids.append(t)
        with torch.no_grad():
            hs = model(torch.tensor([t])).last_hidden_state[0]
        emb.append(floats(torch.nn.functional.normalize(hs.mean(dim=0), dim=0)))
        cls.append(floats(hs[0]))
    return {"inputs": INPUTS, "ids": ids, "embeddings": emb, "cls": cls}


def main():
    from safetensors.torch import save_file

    ap = argparse.ArgumentParser()
    ap.add_argument("--converter", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    hf = os.path.join(a.out, "hf")
    os.makedirs(hf, exist_ok=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        shutil.copy(os.path.join(a.tokenizer, f), hf)
    with open(os.path.join(a.tokenizer, "config.json")) as f:
        bert = json.load(f)
    vocab, pad = bert["vocab_size"], bert["pad_token_id"]
    cfg = transformers_config(vocab, pad)
    model = random_model(cfg)
    state = nomic_state(model)
    refs = references(hf, model)
    check_layout(cfg, state, model, refs["ids"][-1])
    save_file(state, os.path.join(hf, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(hf, "config.json"), "w") as f:
        json.dump(nomic_config(vocab, pad), f, indent=1, sort_keys=True)
    write_st_modules(hf, HIDDEN, "mean_tokens", 2048)
    with open(os.path.join(a.out, "ref.json"), "w") as f:
        json.dump(refs, f, ensure_ascii=False)
    convert(a.converter, hf, os.path.join(a.out, "model-f32.gguf"), "bert-bge", raw_config=True)


if __name__ == "__main__":
    main()
