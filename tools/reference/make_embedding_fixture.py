#!/usr/bin/env python3
"""A tiny Qwen3-Embedding-style fixture and its reference embeddings.

usage: make_embedding_fixture.py --corpus TEXT_FILE --converter LLAMA_CPP_DIR --out DIR

DIR/hf/      a random-init Qwen3 decoder (hidden 64, 2 layers, 4 q / 2 kv heads, tied embeddings)
             saved as Qwen3-Embedding ships: architectures Qwen3ForCausalLM, tensor names without
             "model." (the bare Qwen3Model), a byte-level BPE tokenizer.json trained on the corpus
             whose post-processor appends <|endoftext|>, and sentence-transformers' modules
             (Transformer, Pooling with pooling_mode_lasttoken, Normalize).
DIR/model-f32.gguf   llama.cpp's convert_hf_to_gguf.py of hf/ (writes qwen3.pooling_type = 3).
DIR/ref.json         {"inputs", "ids", "embeddings", "mean", "cls"}: sentence-transformers' encode()
                     of each input (float32, CPU), the token ids its tokenizer gave, and from
                     transformers' last hidden state (after the final norm) the same inputs mean-
                     and first-token-pooled without normalising (the other pooling modes); a
                     transformers-only last-token check of encode() is asserted.
"""
import argparse
import json
import os

import numpy as np
import torch

from st_fixture import convert, write_st_modules

INPUTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Appointment of a new promotion manager was announced Saturday.",
    "a",
    "Numbers 1946 and 41, and <|im_start|> written as text.",
    "The river bridge survived the storm, and by morning the children were fishing from its "
    "stones while their parents counted the damaged boats along the northern bank.",
]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Qwen2's pre-tokenizer split (tokenizer.json of every Qwen2 / Qwen3 model).
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def train_tokenizer(corpus, out_dir):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=256 + 64, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train([corpus], trainer)
    tok.add_special_tokens(SPECIALS)
    eot = tok.token_to_id("<|endoftext|>")
    tok.post_processor = processors.TemplateProcessing(
        single="$A <|endoftext|>", pair="$A <|endoftext|> $B:1 <|endoftext|>:1",
        special_tokens=[("<|endoftext|>", eot)])
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>",
           "pad_token": "<|endoftext|>", "model_max_length": 512, "padding_side": "left"}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    return tok.get_vocab_size(), eot


def make_model(out_dir, vocab, eot):
    from safetensors.torch import save_file
    from transformers import Qwen3Config, Qwen3Model

    torch.manual_seed(3838)
    cfg = Qwen3Config(vocab_size=vocab, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                      max_position_embeddings=512, rms_norm_eps=1e-6, rope_theta=10000.0,
                      tie_word_embeddings=True, bos_token_id=None, eos_token_id=eot,
                      pad_token_id=eot)
    model = Qwen3Model(cfg).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:  # HF initialises norms to ones: draw them so they matter
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            else:
                p.copy_(0.08 * torch.randn_like(p))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()},
              os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    c = cfg.to_dict()
    c["architectures"] = ["Qwen3ForCausalLM"]
    c["dtype"] = "float32"
    c.pop("torch_dtype", None)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(c, f, indent=1, sort_keys=True)


def references(hf_dir):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    st = SentenceTransformer(hf_dir, device="cpu")
    emb = st.encode(INPUTS, batch_size=1, convert_to_numpy=True, normalize_embeddings=False)
    tok = AutoTokenizer.from_pretrained(hf_dir)
    model = AutoModel.from_pretrained(hf_dir, dtype=torch.float32).eval()
    ids, mean, cls, worst = [], [], [], 1.0
    for text, e in zip(INPUTS, emb):
        t = tok(text)["input_ids"]
        assert t[-1] == tok.convert_tokens_to_ids("<|endoftext|>"), t
        ids.append(t)
        with torch.no_grad():
            hs = model(torch.tensor([t])).last_hidden_state[0]
        h = torch.nn.functional.normalize(hs[-1], dim=0).numpy()
        worst = min(worst, float(np.dot(h, e) / np.linalg.norm(e)))
        mean.append([float(x) for x in hs.mean(dim=0)])
        cls.append([float(x) for x in hs[0]])
    assert worst > 0.99999, worst
    return {"inputs": INPUTS, "ids": ids, "embeddings": [[float(x) for x in e] for e in emb],
            "mean": mean, "cls": cls, "check": {"transformers_min_cosine": worst}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--converter", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    hf = os.path.join(a.out, "hf")
    os.makedirs(hf, exist_ok=True)
    vocab, eot = train_tokenizer(a.corpus, hf)
    make_model(hf, vocab, eot)
    write_st_modules(hf, 64, "lasttoken", 512)
    with open(os.path.join(a.out, "ref.json"), "w") as f:
        json.dump(references(hf), f)
    convert(a.converter, hf, os.path.join(a.out, "model-f32.gguf"), "qwen2")


if __name__ == "__main__":
    main()
