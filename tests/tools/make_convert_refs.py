#!/usr/bin/env python3
"""llama.cpp's convert_hf_to_gguf.py run on a fixture's HF directory for the types
`turbospark convert` writes besides f32, for test_convert to compare byte for byte.

usage: make_convert_refs.py --converter LLAMA_CPP_DIR --fixture tests/fixtures/models/glm4_moe
       make_convert_refs.py --converter LLAMA_CPP_DIR --fixture tests/fixtures/models/bert_embedding \
           --pre bert-bge --types f16

Writes convert-<type>.gguf beside hf/ (f16, bf16 and q8_0 unless --types says). As the fixture
scripts do, the converter is told the tiny vocabulary's pre-tokenizer (--pre, GLM's by default:
its hash of a test text is unknown to the converter).
"""
import argparse
import os
import runpy
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--converter", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--pre", default="glm4")
    ap.add_argument("--types", nargs="+", default=["f16", "bf16", "q8_0"])
    a = ap.parse_args()
    conv = os.path.abspath(a.converter)
    sys.path.insert(0, conv)
    sys.path.insert(1, os.path.join(conv, "gguf-py"))
    from conversion.base import TextModel
    TextModel.get_vocab_base_pre = lambda self, tokenizer: a.pre
    script = os.path.join(conv, "convert_hf_to_gguf.py")
    hf = os.path.join(a.fixture, "hf")
    for t in a.types:
        out = os.path.join(a.fixture, "convert-%s.gguf" % t)
        sys.argv = [script, hf, "--outtype", t, "--outfile", out]
        runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
