"""What the sentence-transformers embedding fixtures share (make_embedding_fixture.py,
make_bert_fixture.py, make_xlm_roberta_fixture.py): the modules of an HF directory, a random
encoder's weights, and llama.cpp's conversion of it."""
import json
import os
import subprocess
import sys

POOLING_MODES = ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens",
                 "weightedmean_tokens", "lasttoken")


def write_st_modules(out_dir, dim, pooling_mode, max_seq_length):
    """modules.json (Transformer, Pooling by `pooling_mode`, Normalize) and their configs."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    with open(os.path.join(out_dir, "modules.json"), "w") as f:
        json.dump(modules, f, indent=1)
    os.makedirs(os.path.join(out_dir, "1_Pooling"), exist_ok=True)
    os.makedirs(os.path.join(out_dir, "2_Normalize"), exist_ok=True)
    pooling = {"word_embedding_dimension": dim}
    pooling.update({"pooling_mode_" + m: m == pooling_mode for m in POOLING_MODES})
    pooling["include_prompt"] = True
    with open(os.path.join(out_dir, "1_Pooling", "config.json"), "w") as f:
        json.dump(pooling, f, indent=1)
    with open(os.path.join(out_dir, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": max_seq_length, "do_lower_case": False}, f, indent=1)
    with open(os.path.join(out_dir, "config_sentence_transformers.json"), "w") as f:
        json.dump({"prompts": {}, "default_prompt_name": None, "similarity_fn_name": "cosine"}, f,
                  indent=1)


def convert(converter, hf_dir, out, pre_name, raw_config=False):
    """llama.cpp's convert_hf_to_gguf.py of hf_dir to f32 `out`. The converter names a
    pre-tokenizer by the hash of its output on a test text, which a tiny vocabulary cannot
    match: it is named here (`pre_name`). `raw_config`: the converter reads config.json as it is,
    as it does where transformers does not know the model type (it falls back to the file when
    AutoConfig fails); where transformers does, AutoConfig fills in its own defaults for the keys
    the file names differently (nomic-bert's n_embd is not hidden_size)."""
    code = ("import os, runpy, sys\n"
            "conv, pre, raw = sys.argv[1], sys.argv[2], sys.argv[3] == '1'\n"
            "sys.path[:0] = [conv, os.path.join(conv, 'gguf-py')]\n"
            "import conversion.base as base\n"
            "from conversion.base import TextModel\n"
            "TextModel.get_vocab_base_pre = lambda self, tokenizer: pre\n"
            "if raw:\n"
            "    class NoAutoConfig:\n"
            "        @staticmethod\n"
            "        def from_pretrained(*a, **k): raise ValueError('raw config.json')\n"
            "    base.AutoConfig = NoAutoConfig\n"
            "sys.argv = ['convert_hf_to_gguf.py'] + sys.argv[4:]\n"
            "runpy.run_path(os.path.join(conv, 'convert_hf_to_gguf.py'), run_name='__main__')\n")
    subprocess.run([sys.executable, "-c", code, converter, pre_name, "1" if raw_config else "0",
                    hf_dir, "--outtype", "f32",
                    "--outfile", out], check=True)


def save_random_encoder(model, cfg, architecture, out_dir):
    """Draws a BERT-style encoder's parameters (HF initialises norms to ones and biases to zeros:
    drawn here so they matter) and saves it as transformers would: model.safetensors and a
    config.json naming `architecture`, float32."""
    import torch
    from safetensors.torch import save_file

    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(0.3 * torch.randn_like(p))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()},
              os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    c = cfg.to_dict()
    c["architectures"] = [architecture]
    c["dtype"] = "float32"
    c.pop("torch_dtype", None)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(c, f, indent=1, sort_keys=True)


def floats(v):
    """A vector as the float32 values JSON references hold."""
    import numpy as np

    return [float(np.float32(x)) for x in v]


def st_references(hf_dir, inputs, pooled):
    """sentence-transformers' encode() of each input (float32, CPU, as its modules pool and
    normalise), the ids its tokenizer gives, and transformers' final hidden states of each; the
    states pooled by `pooled` (states -> vector) must point where encode()'s vectors do, which
    checks the module files say what the model does. Returns (vectors, ids, states, tokenizer)."""
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    st = SentenceTransformer(hf_dir, device="cpu")
    emb = st.encode(inputs, batch_size=1, convert_to_numpy=True, normalize_embeddings=False)
    tok = AutoTokenizer.from_pretrained(hf_dir)
    model = AutoModel.from_pretrained(hf_dir, dtype=torch.float32).eval()
    ids, states, worst = [], [], 1.0
    for text, e in zip(inputs, emb):
        t = tok(text)["input_ids"]
        ids.append(t)
        with torch.no_grad():
            hs = model(torch.tensor([t])).last_hidden_state[0]
        p = torch.nn.functional.normalize(pooled(hs), dim=0).numpy()
        worst = min(worst, float(np.dot(p, e) / np.linalg.norm(e)))
        states.append(hs)
    assert worst > 0.99999, worst
    return [floats(e) for e in emb], ids, states, tok
