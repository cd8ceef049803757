"""Reference token ids from llama.cpp (through the llama-cpp-python package) for the real-model
tokenizer comparison in tests/unit/test_tokenizer_real_slow.cpp.

usage: llama_cpp_tokenize.py MODEL.gguf TEXTS.json OUT.json
TEXTS.json is a JSON list of strings; OUT.json receives {"plain": [...], "special": [...]}: per text the ids
of llama.cpp's tokenize(text, add_special=False, parse_special=False / True). Exit 77 when llama_cpp is not
installed (the test then skips)."""
import json
import sys

try:
    import llama_cpp
except ImportError:
    sys.exit(77)

model, texts_path, out_path = sys.argv[1:4]
texts = json.load(open(texts_path, encoding="utf-8"))
llm = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
out = {
    mode: [llm.tokenize(t.encode("utf-8"), add_bos=False, special=special) for t in texts]
    for mode, special in (("plain", False), ("special", True))
}
json.dump(out, open(out_path, "w"))
