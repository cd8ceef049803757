#!/usr/bin/env python3
"""llama.cpp's converter's --mmproj --outtype f16 file of the gemma3_vision and gemma4_vision
fixtures' HF directories, written beside their mmproj-f32.gguf as mmproj-f16.gguf, for
test_convert to compare `turbospark convert --mmproj --type f16` with byte for byte (the f16 file
keeps some tensors f32 and Gemma 3's projection f16 at every type, as the converter does).

Run: LLAMA_CPP_DIR=... python3 tools/reference/make_mmproj_f16_refs.py
"""
import os

from vision_fixture import convert_mmproj

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures",
                      "models")

for fixture in ("gemma3_vision", "gemma4_vision"):
    d = os.path.join(MODELS, fixture)
    convert_mmproj(os.path.join(d, "hf"), os.path.join(d, "mmproj-f16.gguf"), "f16")
