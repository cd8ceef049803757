#!/usr/bin/env python3
"""Reference logits of a fixture with its rope parameters replaced, from transformers in float32.

    make_rope_scaling_reference.py HF_DIR PROMPT_JSON OUT ROPE_JSON [TOKENS] [LAYER_TYPE]

HF_DIR is a fixture's HF form (shared/fixtures/NAME/hf), ROPE_JSON the rope parameters that
replace its own (rope_theta kept), LAYER_TYPE the entry of a per-layer-type `rope_parameters` to
replace (Gemma 3: full_attention). The fixture's prompt is repeated to TOKENS tokens (default: as
it is). Writes float32 little-endian logits [tokens][vocab] to OUT. Needs torch and transformers
5.x. The references in tests/fixtures/models were made with:

    qwen3/ref_logits_yarn.f32:     '{"rope_type": "yarn", "factor": 4.0,
                                     "original_max_position_embeddings": 16}' 40
    gemma3/ref_logits_linear8.f32: '{"rope_type": "linear", "factor": 8.0}' 0 full_attention
"""
import json
import sys

import torch
from transformers import AutoConfig, AutoModelForCausalLM


def main(hf_dir: str, prompt_json: str, out: str, rope_json: str, tokens: str = "0",
         layer_type: str = "") -> None:
    config = AutoConfig.from_pretrained(hf_dir)
    params = config.rope_parameters[layer_type] if layer_type else config.rope_parameters
    replaced = {"rope_theta": params["rope_theta"], **json.loads(rope_json)}
    if layer_type:
        config.rope_parameters[layer_type] = replaced
    else:
        config.rope_parameters = replaced
    model = AutoModelForCausalLM.from_pretrained(hf_dir, config=config, dtype=torch.float32)
    model.eval()
    prompt = json.load(open(prompt_json))["prompt_ids"]
    n = int(tokens) or len(prompt)
    ids = (prompt * (n // len(prompt) + 1))[:n]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float().contiguous()
    logits.numpy().astype("<f4").tofile(out)
    print(f"{out}: {tuple(logits.shape)}")


if __name__ == "__main__":
    main(*sys.argv[1:])
