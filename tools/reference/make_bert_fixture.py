#!/usr/bin/env python3
"""A tiny BERT sentence-embedding fixture and its references.

usage: make_bert_fixture.py --converter LLAMA_CPP_DIR --out DIR

DIR/hf/      a random-init BertModel (hidden 32, 2 layers, 4 heads, GELU FFN of 64, 64 positions,
             2 token types) saved as sentence-transformers models ship: architectures BertModel,
             a WordPiece tokenizer.json (BertNormalizer lowercasing and stripping accents,
             BertPreTokenizer, [CLS] $A [SEP]) trained on the corpus below, and the modules
             Transformer, Pooling (mean) and Normalize (st_fixture.py).
DIR/model-f32.gguf   llama.cpp's convert_hf_to_gguf.py of hf/ (arch bert, pooling_type 1).
DIR/ref.json         {"inputs", "ids", "embeddings", "cls", "tricky", "tricky_ids"}:
                     sentence-transformers' encode() of each input (float32, CPU), the ids its
                     tokenizer gave, transformers' first-token hidden state of each (cls pooling,
                     unnormalised), and the tokenizer's ids for strings that exercise the
                     normaliser and pre-tokenizer.
tokenizers' WordPiece trainer orders tokens of equal count differently from run to run: a new run
makes a different fixture, as valid, whose references are its own.
"""
import argparse
import json
import os

import torch

from st_fixture import convert, floats, save_random_encoder, st_references, write_st_modules

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
    from transformers import BertConfig, BertModel

    torch.manual_seed(3839)
    cfg = BertConfig(vocab_size=vocab, hidden_size=HIDDEN, num_hidden_layers=2,
                     num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                     type_vocab_size=2, hidden_act="gelu", layer_norm_eps=1e-12,
                     pad_token_id=pad)
    model = BertModel(cfg, add_pooling_layer=False).float().eval()
    save_random_encoder(model, cfg, "BertModel", out_dir)


def references(hf_dir):
    emb, ids, states, tok = st_references(hf_dir, INPUTS, lambda hs: hs.mean(dim=0))
    return {"inputs": INPUTS, "ids": ids, "embeddings": emb,
            "cls": [floats(hs[0]) for hs in states],
            "tricky": TRICKY, "tricky_ids": [tok(s)["input_ids"] for s in TRICKY]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--converter", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    hf = os.path.join(a.out, "hf")
    os.makedirs(hf, exist_ok=True)
    vocab, pad = train_tokenizer(hf)
    make_model(hf, vocab, pad)
    write_st_modules(hf, HIDDEN, "mean_tokens", 64)
    with open(os.path.join(a.out, "ref.json"), "w") as f:
        json.dump(references(hf), f, ensure_ascii=False)
    convert(a.converter, hf, os.path.join(a.out, "model-f32.gguf"), "bert-bge")


if __name__ == "__main__":
    main()
