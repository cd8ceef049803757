#!/usr/bin/env python3
"""Prompt lookup decoding, measured: turbospark `run --lookup N` against `--lookup 0`, and
llama.cpp (llama-cpp-python, its LlamaPromptLookupDecoding draft; a measuring tool only, never a
dependency) with and without it, on one task whose answer repeats its prompt: a source file with a
function renamed. Greedy, so each engine's two answers must be the same text.

  python3 bench/bench_lookup.py -m model.gguf [--lookup 10] [-n 300] [-t 2] [-r 3]

The prompt is written in the model's chat format (ChatML, or Gemma's turns when the file name
says gemma). Decode rates count the tokens after the first one over the time after it.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def chat_prompt(model, text):
    if "gemma" in os.path.basename(model).lower():
        return f"<start_of_turn>user\n{text}<end_of_turn>\n<start_of_turn>model\n"
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


def turbospark(args, prompt, lookup):
    with tempfile.NamedTemporaryFile(suffix=".json") as stats:
        out = subprocess.run(
            [os.path.join(ROOT, "build", "turbospark"), "run", "-m", args.model, "-p", prompt,
             "--no-display-prompt", "--temp", "0", "-n", str(args.n_gen), "--lookup", str(lookup),
             "-t", str(args.threads), "--stats-json", stats.name],
            check=True, capture_output=True, text=True).stdout
        s = json.load(open(stats.name))
    return out, s["generated_tokens"] / s["generate_seconds"], s


def llama_cpp(args, prompt, lookup):
    from llama_cpp import Llama
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding
    draft = LlamaPromptLookupDecoding(num_pred_tokens=lookup) if lookup > 0 else None
    llm = Llama(model_path=args.model, n_ctx=4096, n_threads=args.threads,
                n_threads_batch=args.threads, draft_model=draft, logits_all=draft is not None,
                verbose=False)
    ids = llm.tokenize(prompt.encode(), add_bos=True, special=True)
    tokens, t_first = [], None
    for tok in llm.generate(ids, temp=0.0, top_k=1, reset=True):
        if t_first is None:
            t_first = time.perf_counter()
        tokens.append(tok)
        if tok == llm.token_eos() or len(tokens) == args.n_gen:
            break
    rate = (len(tokens) - 1) / (time.perf_counter() - t_first)
    return llm.detokenize(tokens).decode(errors="replace"), rate


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--lookup", type=int, default=10)
    ap.add_argument("-n", "--n-gen", type=int, default=300)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("--source", default=os.path.join(ROOT, "src", "runtime", "prompt_lookup.cpp"))
    ap.add_argument("--no-peer", action="store_true", help="skip llama.cpp")
    args = ap.parse_args()
    code = open(args.source).read()
    prompt = chat_prompt(args.model, "Rename the function lookup_draft to find_draft in this "
                         "code and print the whole file:\n\n" + code)
    result = {"model": os.path.basename(args.model), "n_gen": args.n_gen, "lookup": args.lookup}
    engines = [("turbospark", lambda L: turbospark(args, prompt, L)[:2])]
    if not args.no_peer:
        engines.append(("llama.cpp", lambda L: llama_cpp(args, prompt, L)))
    for name, run in engines:
        for lookup in (0, args.lookup):
            texts, rates = set(), []
            for _ in range(args.repetitions):
                text, rate = run(lookup)
                texts.add(text)
                rates.append(rate)
            key = f"{name} lookup {lookup}"
            result[key] = {"tok_s": round(statistics.mean(rates), 1),
                           "sd": round(statistics.stdev(rates), 1) if len(rates) > 1 else 0.0,
                           "answers": len(texts)}
            result.setdefault(f"{name} texts", []).append(texts.pop())
        a, b = result.pop(f"{name} texts")
        result[f"{name} same text"] = a == b
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
