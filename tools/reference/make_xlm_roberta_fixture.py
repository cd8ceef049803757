#!/usr/bin/env python3
"""A tiny XLM-RoBERTa sentence-embedding fixture (bge-m3's / multilingual-e5's architecture) and
its references.

usage: make_xlm_roberta_fixture.py --converter LLAMA_CPP_DIR --out DIR [--llama-lib DIR]
       make_xlm_roberta_fixture.py --fuzz-seed FILE

DIR/hf/      a random-init XLMRobertaModel (hidden 32, 2 layers, 4 heads, GELU FFN of 64, 64
             positions after the pad_token_id + 1 = 2 that XLM-R's position ids skip, 1 token
             type) saved as sentence-transformers models ship: sentencepiece.bpe.model, a
             SentencePiece Unigram model trained on the corpus below (unk 0, bos 1, eos 2 as
             XLM-R's), transformers' XLMRobertaTokenizer of it (tokenizer.json: Unigram with the
             fairseq id shift, Precompiled charsmap, <s> $A </s>), and the modules Transformer,
             Pooling (cls) and Normalize (st_fixture.py), as bge-m3.
             The normaliser is a subset of sentencepiece's nmt_nfkc (XLM-R's): the rules of
             nmt_nfkc for the code points and sequences listed in nfkc_subset(), which compile
             to the same double-array charsmap format at a few KB instead of nmt_nfkc's 240.
DIR/model-f32.gguf   llama.cpp's convert_hf_to_gguf.py of hf/ (arch bert, tokenizer "t5" with the
             precompiled charsmap, the position table without its first 2 rows).
DIR/ref.json {"inputs", "ids", "embeddings", "mean", "tricky", "tricky_ids", "spm_ids",
             "llama_ids"}: sentence-transformers' encode() of each input (float32, CPU), the ids
             its tokenizer gave, transformers' unnormalised mean of each input's final states
             (mean pooling, as multilingual-e5), and for strings that exercise the normaliser,
             the whitespace rules and unknown characters: HF tokenizers' ids, sentencepiece's
             (shifted to the fairseq ids, <s> ... </s>) and llama.cpp's of the GGUF (with
             --llama-lib: llama.cpp's shared libraries and llama-cpp-python's sources on
             PYTHONPATH), "legacy_ids", those of DIR/legacy_tokenizer/, and "strip_ids", those
             of that tokenizer with transformers 4.4x's normaliser (Precompiled, Strip right,
             Replace(" {2,}" -> U+2581)).
DIR/legacy_tokenizer/tokenizer.json  the vocabulary in transformers 4's pipeline, which the
             published XLM-R models ship (legacy_tokenizer()).
--fuzz-seed writes fuzz/corpus/hf_tokenizer/unigram_charsmap.json: a Unigram tokenizer.json of a
few pieces and a charsmap of four rules, small enough for the fuzzer to mutate
(added_token_string_flag.json beside it is that seed with its first added token's "special" the
string "<unk>": the crash the fuzzer found, now refused by name).
sentencepiece's trainer is deterministic for one corpus and options: a rerun makes the same files
(sentencepiece.bpe.model differs only in the temporary paths its trainer_spec records); the
model's weights come from a fixed seed.
"""
import argparse
import json
import os
import shutil
import tempfile
import unicodedata

import torch

from make_bert_fixture import CORPUS as BERT_CORPUS
from st_fixture import convert, floats, save_random_encoder, st_references, write_st_modules

# The BERT fixture's text and two lines more languages.
CORPUS = BERT_CORPUS + """\
Der schnelle braune Fuchs springt über den faulen Hund. El zorro marrón salta sobre el perro.
Multilingual encoders share one vocabulary across languages, scripts and alphabets.
"""
INPUTS = [
    "The quick brown fox jumps over the lazy dog.",
    "A new manager was announced on Saturday!",
    "a",
    "Café naïve Zürich: the river, the bridge — and 東京.",
    "Der schnelle braune Fuchs springt über den faulen Hund: the encoder attends both ways.",
]
TRICKY = [
    "Héllo, WÖRLD! Ça va?",
    "e\u0301te\u0301 (decomposed accents)",
    "\uff26\uff55\uff4c\uff4c\uff57\uff49\uff44\uff54\uff48 ｶﾀｶﾅ and ＡＢＣ１２３",
    "ﬁne ligatures ① ² ™ ½",
    "東京は日本の首都です。北京和上海",
    "  leading and trailing spaces  ",
    "multiple   spaces\tand\ttabs\nand\r\nnewlines",
    "zero\u200bwidth and \u00a0nbsp\u3000ideographic",
    "emoji 🙂🙂 and 🚀 unknown ✨ symbols",
    "unbelievablyextraordinarilyunrecognisablewords" * 3,
    "x" * 120,
    "<s> written in text </s>",
    "Москва и Киев, Ελλάδα και Αθήνα, İstanbul straße",
    " ",
    "",
]
HIDDEN, LAYERS, HEADS, INNER, POSITIONS, PAD = 32, 2, 4, 64, 64, 1


def nfkc_subset():
    """nmt_nfkc's rules (sentencepiece's own normaliser, rule by rule) for Latin-1 and Latin
    Extended-A, general punctuation and spaces, the CJK symbols, full-width and half-width forms,
    ligatures, super- and subscripts, circled numbers, controls, and the composed forms of the
    decomposed accents the inputs use: TSV lines "src code points<TAB>dst code points"."""
    import sentencepiece as spm

    n = spm.SentencePieceNormalizer(rule_name="nmt_nfkc", add_dummy_prefix=False,
                                    remove_extra_whitespaces=False, escape_whitespaces=False)
    ranges = [(0x0, 0x24f), (0x2000, 0x206f), (0x2070, 0x209f), (0x2100, 0x218f),
              (0x2460, 0x24ff), (0x3000, 0x303f), (0xfb00, 0xfb06), (0xff00, 0xffef)]
    sources = [chr(c) for lo, hi in ranges for c in range(lo, hi + 1)
               if unicodedata.category(chr(c)) != "Cs"]
    sources += [b + m for b in "aeiouncAEIOUNC" for m in "\u0300\u0301\u0302\u0308\u0327"]
    lines = []
    for s in sources:
        d = n.normalize(s)
        if d != s and s != "\0":
            hexs = lambda t: " ".join("%X" % ord(c) for c in t)
            lines.append(hexs(s) + "\t" + hexs(d))
    return "\n".join(lines) + "\n"


def train_tokenizer(out_dir):
    import sentencepiece as spm

    tmp = tempfile.mkdtemp()
    rules = os.path.join(tmp, "rules.tsv")
    with open(rules, "w") as f:
        f.write(nfkc_subset())
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write(CORPUS)
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=os.path.join(tmp, "sp"), model_type="unigram",
        vocab_size=300, hard_vocab_limit=False, character_coverage=0.995, normalization_rule_tsv=rules,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2, num_threads=1)
    shutil.copy(os.path.join(tmp, "sp.model"), os.path.join(out_dir, "sentencepiece.bpe.model"))
    shutil.rmtree(tmp)

    from transformers import XLMRobertaTokenizer

    # transformers converts the SentencePiece file it finds in the directory (its constructor
    # alone ignores a vocab_file).
    tok = XLMRobertaTokenizer.from_pretrained(out_dir, model_max_length=POSITIONS)
    tok.save_pretrained(out_dir)
    return len(tok)


def legacy_tokenizer(hf_dir, out_dir):
    """The same vocabulary in the tokenizer.json that transformers 4 wrote and bge-m3 /
    multilingual-e5 ship: Precompiled then Replace(" {2,}" -> " ") and a Metaspace pre-tokenizer
    without WhitespaceSplit (a trailing space becomes a piece of its own there)."""
    import base64

    from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers

    with open(os.path.join(hf_dir, "tokenizer.json")) as f:
        charsmap = json.load(f)["normalizer"]["precompiled_charsmap"]
    tok = Tokenizer.from_file(os.path.join(hf_dir, "tokenizer.json"))
    tok.normalizer = normalizers.Sequence([
        normalizers.Precompiled(base64.b64decode(charsmap)),
        normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always",
                                                 split=True)
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    legacy = [tok.encode(s).ids for s in TRICKY]
    # transformers 4.4x's: the text's end stripped, runs of spaces one marker (the C++ test builds
    # this tokenizer.json from the legacy one, so only its ids are kept).
    tok.normalizer = normalizers.Sequence([
        normalizers.Precompiled(base64.b64decode(charsmap)),
        normalizers.Strip(left=False, right=True),
        normalizers.Replace(Regex(" {2,}"), "\u2581")])
    return legacy, [tok.encode(s).ids for s in TRICKY]


def make_model(out_dir, vocab):
    from transformers import XLMRobertaConfig, XLMRobertaModel

    torch.manual_seed(3841)
    cfg = XLMRobertaConfig(vocab_size=vocab, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                           num_attention_heads=HEADS, intermediate_size=INNER,
                           max_position_embeddings=POSITIONS + PAD + 1, type_vocab_size=1,
                           hidden_act="gelu", layer_norm_eps=1e-5, pad_token_id=PAD,
                           bos_token_id=0, eos_token_id=2)
    model = XLMRobertaModel(cfg, add_pooling_layer=False).float().eval()
    save_random_encoder(model, cfg, "XLMRobertaModel", out_dir)


def spm_ids(hf_dir, text):
    """sentencepiece's ids of `text` in the fairseq order XLM-R's tokenizers use: a piece's id
    plus one, <unk> 3, between <s> and </s>."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=os.path.join(hf_dir, "sentencepiece.bpe.model"))
    return [0] + [3 if i == 0 else i + 1 for i in sp.encode(text)] + [2]


def llama_ids(lib_dir, gguf, texts):
    os.environ["LLAMA_CPP_LIB_PATH"] = lib_dir
    from llama_cpp import Llama

    m = Llama(model_path=gguf, vocab_only=True, verbose=False)
    return [m.tokenize(t.encode("utf-8"), add_bos=True, special=False) for t in texts]


def references(hf_dir):
    emb, ids, states, tok = st_references(hf_dir, INPUTS, lambda hs: hs[0])
    return {"inputs": INPUTS, "ids": ids, "embeddings": emb,
            "mean": [floats(hs.mean(dim=0)) for hs in states],
            "tricky": TRICKY, "tricky_ids": [tok(s)["input_ids"] for s in TRICKY],
            "spm_ids": [spm_ids(hf_dir, s) for s in TRICKY]}


def fuzz_seed(path):
    import base64

    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    tmp = tempfile.mkdtemp()
    with open(os.path.join(tmp, "rules.tsv"), "w") as f:
        f.write("FF21\t41\nFB01\t66 69\n9\t20\n65 301\tE9\n")
    with open(os.path.join(tmp, "c.txt"), "w") as f:
        f.write("hello world caf\u00e9 fine\nthe fox and the dog\n")
    spm.SentencePieceTrainer.train(
        input=os.path.join(tmp, "c.txt"), model_prefix=os.path.join(tmp, "sp"),
        model_type="unigram", vocab_size=30, hard_vocab_limit=False,
        normalization_rule_tsv=os.path.join(tmp, "rules.tsv"), minloglevel=2)
    m = pb.ModelProto()
    with open(os.path.join(tmp, "sp.model"), "rb") as f:
        m.ParseFromString(f.read())
    shutil.rmtree(tmp)
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    seed = {
        "version": "1.0",
        "added_tokens": [{"id": i, "content": t, "special": True} for i, t in enumerate(specials)],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Precompiled", "precompiled_charsmap":
                base64.b64encode(m.normalizer_spec.precompiled_charsmap).decode()},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581",
                          "prepend_scheme": "always", "split": True},
        "post_processor": {"type": "TemplateProcessing", "single": [
            {"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
            {"SpecialToken": {"id": "</s>", "type_id": 0}}]},
        "model": {"type": "Unigram", "unk_id": 3, "byte_fallback": False,
                  "vocab": [[t, 0.0] for t in specials] +
                           [[p.piece, round(p.score, 4)] for p in m.pieces[3:]]},
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(seed, f, ensure_ascii=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--converter")
    ap.add_argument("--out")
    ap.add_argument("--llama-lib", help="llama.cpp's build/bin, for llama.cpp's tokenization")
    ap.add_argument("--fuzz-seed", help="write the Unigram tokenizer fuzz seed here, and stop")
    a = ap.parse_args()
    if a.fuzz_seed:
        fuzz_seed(a.fuzz_seed)
        return
    if not a.converter or not a.out:
        ap.error("--converter and --out are required")
    hf = os.path.join(a.out, "hf")
    os.makedirs(hf, exist_ok=True)
    vocab = train_tokenizer(hf)
    make_model(hf, vocab)
    write_st_modules(hf, HIDDEN, "cls_token", POSITIONS)
    ref = references(hf)
    ref["legacy_ids"], ref["strip_ids"] = legacy_tokenizer(
        hf, os.path.join(a.out, "legacy_tokenizer"))
    gguf = os.path.join(a.out, "model-f32.gguf")
    convert(a.converter, hf, gguf, "default")
    if a.llama_lib:
        ref["llama_ids"] = llama_ids(a.llama_lib, gguf, TRICKY)
    with open(os.path.join(a.out, "ref.json"), "w") as f:
        json.dump(ref, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
