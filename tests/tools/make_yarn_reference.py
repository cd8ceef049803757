#!/usr/bin/env python3
"""Reference logits of the qwen3 fixture with YaRN rope scaling, from transformers in float32.

The fixture's HF form (shared/fixtures/qwen3/hf) with its rope parameters replaced by YaRN
(factor 4 over an original context of 32, transformers' defaults otherwise), run on the fixture's
prompt repeated to 96 tokens. Writes float32 little-endian logits [96][vocab] to OUT.
Needs torch and transformers (5.x).

    python3 tests/tools/make_yarn_reference.py ../shared/fixtures/qwen3/hf \
        tests/fixtures/models/qwen3/prompt.json tests/fixtures/models/qwen3/ref_logits_yarn.f32
"""
import json
import sys

import torch
from transformers import AutoConfig, AutoModelForCausalLM

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}
TOKENS = 96


def main(hf_dir: str, prompt_json: str, out: str) -> None:
    config = AutoConfig.from_pretrained(hf_dir)
    theta = config.rope_parameters["rope_theta"]
    config.rope_parameters = {"rope_theta": theta, **YARN}
    model = AutoModelForCausalLM.from_pretrained(hf_dir, config=config, dtype=torch.float32)
    model.eval()
    prompt = json.load(open(prompt_json))["prompt_ids"]
    ids = (prompt * (TOKENS // len(prompt) + 1))[:TOKENS]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float().contiguous()
    logits.numpy().astype("<f4").tofile(out)
    print(f"{out}: {tuple(logits.shape)}, attention scaling {model.model.rotary_emb.attention_scaling}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
