#!/usr/bin/env python3
"""llama.cpp's converter's files that test_convert compares `turbospark convert` with byte for
byte, beside the vision fixtures' mmproj-f32.gguf (which their own scripts make):

  gemma3_vision/mmproj-f16.gguf, gemma4_vision/mmproj-f16.gguf
      --mmproj --outtype f16 of hf/ (some tensors stay f32, Gemma 3's projection is f16 at every
      type, as the converter decides)
  gemma3_vision/text-f32.gguf
      --outtype f32 of hf/ with the gemma3 fixture's tokenizer.model and tokenizer_config.json
      beside it (hf/ has no tokenizer): the text decoder of a Gemma3ForConditionalGeneration
  gemma4_vision/text-f32.fnv1a64
      the FNV-1a 64 hash (hex) of --outtype f32 of hf/ with the gemma4 fixture's tokenizer.json
      and tokenizer_config.json beside it (the file itself, 321 KB, is not kept)

Run: LLAMA_CPP_DIR=... python3 tools/reference/make_convert_vision_refs.py GEMMA3_FIXTURE_HF_DIR \
         GEMMA4_FIXTURE_HF_DIR
"""
import os
import subprocess
import sys
import tempfile

from vision_fixture import convert_mmproj

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures",
                      "models")


def convert_text(fixture, tokenizer_dir, tokenizer_files, out):
    """The converter's f32 file of the fixture's hf/ with the tokenizer files beside it (in a
    folder named hf, as general.name comes from it)."""
    d = os.path.join(MODELS, fixture)
    llama = os.environ["LLAMA_CPP_DIR"]
    with tempfile.TemporaryDirectory() as tmp:
        hf = os.path.join(tmp, "hf")
        os.mkdir(hf)
        for f in ("config.json", "model.safetensors", "preprocessor_config.json"):
            os.symlink(os.path.join(d, "hf", f), os.path.join(hf, f))
        for f in tokenizer_files:
            os.symlink(os.path.join(tokenizer_dir, f), os.path.join(hf, f))
        env = dict(os.environ, PYTHONPATH=os.path.join(llama, "gguf-py"))
        subprocess.run([sys.executable, os.path.join(llama, "convert_hf_to_gguf.py"), hf,
                        "--outtype", "f32", "--outfile", out], check=True, env=env)


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    gemma3_tok, gemma4_tok = (os.path.abspath(p) for p in sys.argv[1:])
    for fixture in ("gemma3_vision", "gemma4_vision"):
        d = os.path.join(MODELS, fixture)
        convert_mmproj(os.path.join(d, "hf"), os.path.join(d, "mmproj-f16.gguf"), "f16")
    convert_text("gemma3_vision", gemma3_tok, ("tokenizer.model", "tokenizer_config.json"),
                 os.path.join(MODELS, "gemma3_vision", "text-f32.gguf"))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "text.gguf")
        convert_text("gemma4_vision", gemma4_tok, ("tokenizer.json", "tokenizer_config.json"), out)
        with open(out, "rb") as f:
            digest = fnv1a64(f.read())
    with open(os.path.join(MODELS, "gemma4_vision", "text-f32.fnv1a64"), "w") as f:
        f.write("%016x\n" % digest)


if __name__ == "__main__":
    main()
