#!/usr/bin/env python3
"""llama.cpp's converter's files that test_convert compares `turbospark convert` with byte for
byte, beside the vision fixtures' mmproj-f32.gguf (which their own scripts make):

  gemma3_vision/mmproj-f16.gguf, gemma4_vision/mmproj-f16.gguf
      --mmproj --outtype f16 of hf/ (some tensors stay f32, Gemma 3's projection is f16 at every
      type, as the converter decides)
  gemma3_vision/text-f32.gguf
      --outtype f32 of hf/ with the gemma3 fixture's tokenizer.model and tokenizer_config.json
      beside it (hf/ has no tokenizer): the text decoder of a Gemma3ForConditionalGeneration

Run: LLAMA_CPP_DIR=... python3 tools/reference/make_convert_vision_refs.py GEMMA3_FIXTURE_HF_DIR
"""
import os
import subprocess
import sys
import tempfile

from vision_fixture import convert_mmproj

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures",
                      "models")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    tokenizer_dir = os.path.abspath(sys.argv[1])
    for fixture in ("gemma3_vision", "gemma4_vision"):
        d = os.path.join(MODELS, fixture)
        convert_mmproj(os.path.join(d, "hf"), os.path.join(d, "mmproj-f16.gguf"), "f16")

    d = os.path.join(MODELS, "gemma3_vision")
    llama = os.environ["LLAMA_CPP_DIR"]
    with tempfile.TemporaryDirectory() as tmp:
        hf = os.path.join(tmp, "hf")
        os.mkdir(hf)
        for f in ("config.json", "model.safetensors", "preprocessor_config.json"):
            os.symlink(os.path.join(d, "hf", f), os.path.join(hf, f))
        for f in ("tokenizer.model", "tokenizer_config.json"):
            os.symlink(os.path.join(tokenizer_dir, f), os.path.join(hf, f))
        env = dict(os.environ, PYTHONPATH=os.path.join(llama, "gguf-py"))
        subprocess.run([sys.executable, os.path.join(llama, "convert_hf_to_gguf.py"), hf,
                        "--outtype", "f32", "--outfile", os.path.join(d, "text-f32.gguf")],
                       check=True, env=env)


if __name__ == "__main__":
    main()
