"""Reference token ids from llama.cpp (through the llama-cpp-python package) for the real-model
tokenizer comparison in tests/unit/test_tokenizer_real_slow.cpp.

usage: llama_cpp_tokenize.py MODEL.gguf TEXTS.json OUT.json
TEXTS.json is a JSON list of strings; OUT.json receives {"plain": [...], "special": [...], "pieces": [...]}: per text the
ids of llama.cpp's tokenize(text, add_special=False, parse_special=False / True), and for every
token id the hex of its token_to_piece(special=False) and token_to_piece(special=True) bytes;
"eog": the end-of-generation ids; "bos", "eos", "add_bos", "add_eos". Exit 77 when llama_cpp is not
installed (the test then skips)."""
import ctypes
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
vocab = llama_cpp.llama_model_get_vocab(llm.model)
buf = ctypes.create_string_buffer(1024)


def piece(token, special):
    n = llama_cpp.llama_token_to_piece(vocab, token, buf, len(buf), 0, special)
    return buf.raw[:n].hex()


n_tokens = llama_cpp.llama_vocab_n_tokens(vocab)
out["pieces"] = [[piece(t, False), piece(t, True)] for t in range(n_tokens)]
out["eog"] = [t for t in range(n_tokens) if llama_cpp.llama_vocab_is_eog(vocab, t)]
out["bos"] = llama_cpp.llama_vocab_bos(vocab)
out["eos"] = llama_cpp.llama_vocab_eos(vocab)
out["add_bos"] = bool(llama_cpp.llama_vocab_get_add_bos(vocab))
out["add_eos"] = bool(llama_cpp.llama_vocab_get_add_eos(vocab))
json.dump(out, open(out_path, "w"))
