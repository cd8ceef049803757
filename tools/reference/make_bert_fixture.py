#!/usr/bin/env python3
"""A tiny BERT sentence-embedding fixture and its references.

usage: make_bert_fixture.py --converter LLAMA_CPP_DIR --out DIR

DIR/hf/      a random-init BertModel (hidden 32, 2 layers, 4 heads, GELU FFN of 64, 64 positions,
             2 token types) saved as sentence-transformers models ship: architectures BertModel,
             a WordPiece tokenizer.json (BertNormalizer lowercasing and stripping accents,
             BertPreTokenizer, [CLS] $A [SEP]) trained on the corpus below, and the modules
             Transformer, Pooling (mean) and Normalize.
DIR/model-f32.gguf   llama.cpp's convert_hf_to_gguf.py of hf/ (arch bert, pooling_type 1).
DIR/ref.json         {"inputs", "ids", "embeddings", "cls", "tricky", "tricky_ids"}:
                     sentence-transformers' encode() of each input (float32, CPU), the ids its
                     tokenizer gave, transformers' first-token hidden state of each (cls pooling,
                     unnormalised), and the tokenizer's ids for strings that exercise the
                     normaliser and pre-tokenizer.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

CORPUS = """\
The quick brown fox jumps over the lazy dog. A river runs under the old stone bridge, and the
children play near the water while their parents talk about the weather and the harvest.
Appointment of a new manager was announced on Saturday; the company expects growth next year.
Numbers such as 1946, 2024 and 3.14 appear in reports. Don't stop: keep reading, writing and
learning! Café, naïve, résumé and façade are French words; Zürich, Köln and Málaga are cities.
東京は日本の首都です。 北京和上海是中国的城市。 Москва и Киев — города. Ελλάδα και Αθήνα.
The encoder reads every token at once, attends both ways, and pools the states into a vector.
Embedding models map sentences to points; similar sentences land close to each other.
"""
INPUTS = [
    "The quick brown fox jumps over the lazy dog.",
    "A new manager was announced on Saturday!",
    "a",
    "Café naïve Zürich: the river, the bridge — and 東京.",
    "Embedding models map similar sentences to close points, and the encoder attends both ways "
    "over every token of the sentence before pooling.",
]
TRICKY = [
    "Héllo, WÖRLD! Ça va?",
    "e\u0301te\u0301 (decomposed accents)",
    "don't...stop—now;ok",
    "unbelievablyextraordinarilyunrecognisable words",
    "東京は日本の首都です",
    "mixed日本text and ÅNGSTRÖM",
    "tabs\tand\nnewlines  and   spaces",
    "zero\u200bwidth and \u00a0nbsp",
    "[CLS] written in text [SEP]",
    "İstanbul ΣΊΣΥΦΟΣ straße",
    "x" * 120,
    "emoji 🙂 and symbols $5 + 3% @home #tag",
    "",
]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
HIDDEN = 32


def train_tokenizer(out_dir):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers import trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    trainer = trainers.WordPieceTrainer(vocab_size=300, special_tokens=SPECIALS,
                                        show_progress=False)
    tok.train_from_iterator(CORPUS.splitlines(), trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    cfg = {"tokenizer_class": "BertTokenizer", "do_lower_case": True, "unk_token": "[UNK]",
           "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
           "mask_token": "[MASK]", "model_max_length": 64, "strip_accents": None,
           "tokenize_chinese_chars": True}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    # The converter reads the vocabulary from vocab.txt, as BERT checkpoints ship it.
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    with open(os.path.join(out_dir, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t, _ in vocab))
    return tok.get_vocab_size(), tok.token_to_id("[PAD]")


def make_model(out_dir, vocab, pad):
    from safetensors.torch import save_file
    from transformers import BertConfig, BertModel

    torch.manual_seed(3839)
    cfg = BertConfig(vocab_size=vocab, hidden_size=HIDDEN, num_hidden_layers=2,
                     num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                     type_vocab_size=2, hidden_act="gelu", layer_norm_eps=1e-12,
                     pad_token_id=pad)
    model = BertModel(cfg, add_pooling_layer=False).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name:  # HF initialises norms to ones: draw them so they matter
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(0.3 * torch.randn_like(p))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()},
              os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    c = cfg.to_dict()
    c["architectures"] = ["BertModel"]
    c["dtype"] = "float32"
    c.pop("torch_dtype", None)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(c, f, indent=1, sort_keys=True)


def write_st_modules(out_dir):
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    with open(os.path.join(out_dir, "modules.json"), "w") as f:
        json.dump(modules, f, indent=1)
    os.makedirs(os.path.join(out_dir, "1_Pooling"), exist_ok=True)
    os.makedirs(os.path.join(out_dir, "2_Normalize"), exist_ok=True)
    pooling = {"word_embedding_dimension": HIDDEN, "pooling_mode_cls_token": False,
               "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
               "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_weightedmean_tokens": False,
               "pooling_mode_lasttoken": False, "include_prompt": True}
    with open(os.path.join(out_dir, "1_Pooling", "config.json"), "w") as f:
        json.dump(pooling, f, indent=1)
    with open(os.path.join(out_dir, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": 64, "do_lower_case": False}, f, indent=1)


def floats(v):
    return [float(np.float32(x)) for x in v]


def references(hf_dir):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    st = SentenceTransformer(hf_dir, device="cpu")
    emb = st.encode(INPUTS, batch_size=1, convert_to_numpy=True, normalize_embeddings=False)
    tok = AutoTokenizer.from_pretrained(hf_dir)
    model = AutoModel.from_pretrained(hf_dir, dtype=torch.float32).eval()
    ids, cls, worst = [], [], 1.0
    for text, e in zip(INPUTS, emb):
        t = tok(text)["input_ids"]
        ids.append(t)
        with torch.no_grad():
            hs = model(torch.tensor([t])).last_hidden_state[0]
        m = torch.nn.functional.normalize(hs.mean(dim=0), dim=0).numpy()
        worst = min(worst, float(np.dot(m, e) / np.linalg.norm(e)))
        cls.append(floats(hs[0]))
    assert worst > 0.99999, worst
    return {"inputs": INPUTS, "ids": ids, "embeddings": [floats(e) for e in emb], "cls": cls,
            "tricky": TRICKY, "tricky_ids": [tok(s)["input_ids"] for s in TRICKY]}


def convert(converter, hf_dir, out):
    # The converter names a pre-tokenizer by the hash of its output on a test text, which a tiny
    # vocabulary cannot match: it is named here (WordPiece reads no pre-tokenizer name).
    code = ("import os, runpy, sys\n"
            "conv = sys.argv[1]\n"
            "sys.path[:0] = [conv, os.path.join(conv, 'gguf-py')]\n"
            "from conversion.base import TextModel\n"
            "TextModel.get_vocab_base_pre = lambda self, tokenizer: 'bert-bge'\n"
            "sys.argv = ['convert_hf_to_gguf.py'] + sys.argv[2:]\n"
            "runpy.run_path(os.path.join(conv, 'convert_hf_to_gguf.py'), run_name='__main__')\n")
    subprocess.run([sys.executable, "-c", code, converter, hf_dir, "--outtype", "f32", "--outfile",
                    out], check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--converter", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    hf = os.path.join(a.out, "hf")
    os.makedirs(hf, exist_ok=True)
    vocab, pad = train_tokenizer(hf)
    make_model(hf, vocab, pad)
    write_st_modules(hf)
    with open(os.path.join(a.out, "ref.json"), "w") as f:
        json.dump(references(hf), f, ensure_ascii=False)
    convert(a.converter, hf, os.path.join(a.out, "model-f32.gguf"))


if __name__ == "__main__":
    main()
