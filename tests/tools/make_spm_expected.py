"""Writes tests/fixtures/tokenizer/spm_expected.jsonl: reference token ids from the SentencePiece
library itself (pip install sentencepiece) for the fixture tokenizer.model, on llama.cpp's vocab
test strings plus a few made-up ones. Run from the repository root."""
import json
import sentencepiece as spm

sp = spm.SentencePieceProcessor(model_file="tests/fixtures/tokenizer/tokenizer.model")
sep = "\n__ggml_vocab_test__\n"
raw = open("tests/fixtures/vocab/ggml-vocab-llama-spm.gguf.inp", encoding="utf-8", newline="").read()
texts = raw.split(sep)
if texts and texts[-1] == "":
    texts.pop()
texts += [
    "In the morning, the children walked to the school",
    "Numbers 1234567 and 3.14159, prices $12.50!",
    "Tabs\tand\nnewlines\r\nmixed   spaces  ",
    "Ünïcödé façade — naïve café; 日本語のテキスト; emoji 🦙🚀",
    "<s> and </s> written as text",
]
with open("tests/fixtures/tokenizer/spm_expected.jsonl", "w", encoding="utf-8") as out:
    for t in texts:
        out.write(json.dumps({"text": t, "ids": sp.encode(t)}, ensure_ascii=False) + "\n")
print(len(texts), "cases")
