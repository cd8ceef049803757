"""Reference token ids from Hugging Face `tokenizers` (pip install tokenizers) for
tests/unit/test_tokenizer_real_slow.cpp.

usage: hf_tokenize.py DIR TEXTS.json OUT.json
Encodes each text of TEXTS.json with DIR/tokenizer.json, add_special_tokens=False, and writes the
id lists to OUT.json. Exit 77 when the package is not installed (the test then skips)."""
import json
import sys

try:
    from tokenizers import Tokenizer
except ImportError:
    sys.exit(77)

directory, texts_path, out_path = sys.argv[1:4]
tok = Tokenizer.from_file(directory + "/tokenizer.json")
texts = json.load(open(texts_path, encoding="utf-8"))
json.dump([tok.encode(t, add_special_tokens=False).ids for t in texts], open(out_path, "w"))
