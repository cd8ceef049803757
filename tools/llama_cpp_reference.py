#!/usr/bin/env python3
"""Independent reference figures from llama.cpp (through llama-cpp-python) for real GGUF models,
and their comparison with turbospark. A measuring tool only: nothing in the build or the tests
imports it; the figures it prints are frozen by hand into tests/unit/test_real_models_slow.cpp.

  greedy  MODEL [-n 32]             greedy continuations of the prompts below (raw completion, no
                                    chat template) with the top-2 logit gap of every step, as the
                                    JSON frozen in tests/fixtures/real_models/
  ppl     MODEL TEXT [-c 512] [--chunks N]
                                    perplexity by llama.cpp's method: the whole text tokenized at
                                    once (BOS first when the model adds one), cut into n_ctx
                                    chunks, BOS written over each chunk's first token, the second
                                    half of each chunk scored
  selfcheck MODEL [-n 32]           llama.cpp's greedy continuations under settings that change
                                    only rounding (threads, flash attention, KV type), each
                                    against the 2-thread default: how often they stay identical
  compare MODEL TURBOSPARK [-n 32]  llama.cpp's greedy continuations fed to `turbospark logits`
                                    (teacher forcing): the first position where turbospark's argmax
                                    differs is where free-running greedy decoding diverges, and the
                                    top-2 logit gaps of both engines there say whether it is a
                                    near-tie; the continuation is teacher-forced, so every
                                    later step is compared too (the mismatches list)

pip install llama-cpp-python (0.3.36 was used for the frozen figures).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from datetime import date

import numpy as np

PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little",
    "The quick brown fox jumps over the lazy dog. The",
    "def fibonacci(n):\n",
    "Water boils at a temperature of",
    "In 1969, Neil Armstrong",
    "The three primary colors are",
    "import numpy as np\n",
]


def open_model(path, n_ctx, logits_all, **options):
    from llama_cpp import Llama

    settings = {"n_threads": os.cpu_count(), **options}
    return Llama(model_path=path, n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=n_ctx,
                 logits_all=logits_all, verbose=False, **settings)


def add_bos(llm):
    return bool(llm.metadata.get("tokenizer.ggml.add_bos_token", "false") == "true")


def top2(row):
    i1, i2 = np.argsort(row)[-2:][::-1]
    return int(i1), float(row[i1]), int(i2), float(row[i2])


def greedy(path, n_predict, **options):
    llm = open_model(path, 512, True, **options)
    out = []
    for prompt in PROMPTS:
        ids = llm.tokenize(prompt.encode(), add_bos=add_bos(llm), special=False)
        llm.reset()
        llm.eval(ids)
        gen, steps = [], []
        for _ in range(n_predict):
            row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            t1, l1, t2, l2 = top2(row)
            steps.append({"top1": t1, "top2": t2, "gap": l1 - l2})
            gen.append(t1)
            llm.eval([t1])
        out.append({"prompt": prompt, "prompt_ids": ids, "ids": gen, "steps": steps,
                    "text": llm.detokenize(gen).decode(errors="replace")})
    return out


def log_softmax_at(rows, targets):
    rows = rows.astype(np.float64)
    mx = rows.max(axis=1, keepdims=True)
    lse = np.log(np.exp(rows - mx).sum(axis=1)) + mx[:, 0]
    return lse - rows[np.arange(len(targets)), targets]


def ppl(path, text_path, n_ctx, max_chunks):
    llm = open_model(path, n_ctx, True)
    with open(text_path, "rb") as f:
        text = f.read()
    bos = add_bos(llm)
    tokens = llm.tokenize(text, add_bos=bos, special=False)
    chunks = len(tokens) // n_ctx
    if max_chunks > 0:
        chunks = min(chunks, max_chunks)
    first = n_ctx // 2
    nll, count = 0.0, 0
    for c in range(chunks):
        window = list(tokens[c * n_ctx:(c + 1) * n_ctx])
        if bos:
            window[0] = llm.token_bos()
        llm.reset()
        llm.eval(window)
        logits = np.array(llm.scores[first:n_ctx - 1], dtype=np.float32)
        targets = np.array(tokens[c * n_ctx + first + 1:(c + 1) * n_ctx])
        nll += float(log_softmax_at(logits, targets).sum())
        count += len(targets)
        print(f"chunk {c + 1}/{chunks} ppl {math.exp(nll / count):.4f}", file=sys.stderr)
    return {"ppl": math.exp(nll / count), "tokens": len(tokens), "chunks": chunks,
            "scored": count, "n_ctx": n_ctx, "add_bos": bos}


def turbospark_logits(binary, model, ids, vocab):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "logits.f32")
        subprocess.run([binary, "logits", "-m", model, "-c", str(len(ids) + 8), "--tokens",
                        ",".join(map(str, ids)), "--out", out], check=True,
                       stderr=subprocess.DEVNULL)
        return np.fromfile(out, dtype=np.float32).reshape(len(ids), vocab)


def compare(path, binary, n_predict):
    runs = greedy(path, n_predict)
    from llama_cpp import Llama

    vocab = Llama(model_path=path, vocab_only=True, verbose=False).n_vocab()
    report = []
    for r in runs:
        ids = r["prompt_ids"] + r["ids"]
        logits = turbospark_logits(binary, path, ids, vocab)
        p = len(r["prompt_ids"])
        entry = {"prompt": r["prompt"], "match": True, "llama_cpp_text": r["text"],
                 "prompt_ids": r["prompt_ids"], "ids": r["ids"],
                 "llama_cpp_gaps": [round(s["gap"], 3) for s in r["steps"]],
                 "turbospark_gaps": [], "mismatches": [], "max_gap_change": 0.0}
        for k, step in enumerate(r["steps"]):
            row = logits[p - 1 + k]
            t1, l1, t2, l2 = top2(row)
            # The margin of llama.cpp's choice over every other token in turbospark's row, to set
            # against llama.cpp's own margin (its top-2 gap): how far the noise moved it.
            pair_gap = float(row[step["top1"]] - np.delete(row, step["top1"]).max())
            entry["turbospark_gaps"].append(round(pair_gap, 3))
            entry["max_gap_change"] = max(entry["max_gap_change"], abs(pair_gap - step["gap"]))
            if t1 != step["top1"]:
                if entry["match"]:
                    entry.update({"match": False, "position": k, "llama_cpp_top2": [step["top1"],
                                  step["top2"]], "llama_cpp_gap": step["gap"],
                                  "turbospark_top2": [t1, t2], "turbospark_gap": l1 - l2})
                entry["mismatches"].append([k, round(step["gap"], 3), round(l1 - l2, 3)])
        report.append(entry)
    return {"matches": sum(e["match"] for e in report), "prompts": len(report), "runs": report}


# llama.cpp against itself: settings that change only rounding (thread count, flash attention,
# an f32 KV cache instead of f16). How often its own greedy continuations stay identical is the
# most any other implementation can expect to match them.
SETTINGS = {"2 threads": {"n_threads": 2}, "1 thread": {"n_threads": 1},
            "flash attention": {"n_threads": 2, "flash_attn": True},
            "f32 KV cache": {"n_threads": 2, "type_k": 0, "type_v": 0}}


def selfcheck(path, n_predict):
    runs = {name: [r["ids"] for r in greedy(path, n_predict, **o)] for name, o in SETTINGS.items()}
    base = runs["2 threads"]
    report = {}
    for name, ids in runs.items():
        first = [next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
                 for a, b in zip(base, ids)]
        report[name] = {"identical": sum(f is None for f in first), "prompts": len(first),
                        "first_divergence": first}
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("greedy")
    g.add_argument("model")
    g.add_argument("-n", type=int, default=32)
    p = sub.add_parser("ppl")
    p.add_argument("model")
    p.add_argument("text")
    p.add_argument("-c", type=int, default=512)
    p.add_argument("--chunks", type=int, default=0, help="score only the first N chunks")
    c = sub.add_parser("compare")
    c.add_argument("model")
    c.add_argument("turbospark")
    c.add_argument("-n", type=int, default=32)
    sc = sub.add_parser("selfcheck")
    sc.add_argument("model")
    sc.add_argument("-n", type=int, default=32)
    a = ap.parse_args()
    if a.cmd == "greedy":
        import llama_cpp

        runs = greedy(a.model, a.n)
        result = {"source": f"llama-cpp-python {llama_cpp.__version__}, "
                            f"tools/llama_cpp_reference.py greedy -n {a.n}, {date.today()}",
                  "model": os.path.basename(a.model),
                  "runs": [{"prompt": r["prompt"], "prompt_ids": r["prompt_ids"], "ids": r["ids"],
                            "gaps": [round(s["gap"], 4) for s in r["steps"]]} for r in runs]}
    elif a.cmd == "ppl":
        result = ppl(a.model, a.text, a.c, a.chunks)
    elif a.cmd == "selfcheck":
        result = selfcheck(a.model, a.n)
    else:
        result = compare(a.model, a.turbospark, a.n)
    if a.cmd == "greedy":
        # One run a line: the frozen fixture stays small and reviewable.
        runs = ",\n  ".join(json.dumps(r) for r in result.pop("runs"))
        print(json.dumps(result)[:-1] + ', "runs": [\n  ' + runs + "\n]}")
    else:
        print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
