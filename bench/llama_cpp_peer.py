#!/usr/bin/env python3
"""llama.cpp as a peer for `turbospark bench`, through llama-cpp-python (pip install
llama-cpp-python; a measuring tool only, never a dependency).

The same two tests on the same GGUF file, shaped like turbospark bench's: pp = one prompt of P
random token ids through prefill (logits of the last token only), tg = N tokens decoded one at a
time after a prompt of T random tokens; one untimed run of each first, then R timed repetitions,
tokens/s as mean and sample stddev. Prints one JSON object.

  python3 bench/llama_cpp_peer.py -m model.gguf -p 512 -n 128 -r 5 -t 2

--embedding N runs an embedding model's test instead, as `turbospark bench` does for an encoder
("emb P x N"): N texts of P random token ids, each its own sequence, in one llama_decode (the
batch and context sized to hold them, the model's pooling), tokens/s counting all of them.
"""
import argparse
import json
import os
import random
import statistics
import time


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("-n", "--n-gen", type=int, default=128)
    ap.add_argument("-r", "--repetitions", type=int, default=5)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--tg-prompt", type=int, default=16)
    ap.add_argument("--batch", type=int, default=512, help="llama.cpp n_batch = n_ubatch")
    ap.add_argument("--embedding", type=int, default=0, metavar="N",
                    help="an embedding model's test: N texts of -p tokens a pass")
    args = ap.parse_args()
    if args.embedding > 0:
        return embedding_test(args)

    import llama_cpp
    from llama_cpp import Llama

    ctx = max(args.n_prompt, args.tg_prompt + args.n_gen)
    llm = Llama(model_path=args.model, n_ctx=ctx, n_batch=args.batch, n_ubatch=args.batch,
                n_threads=args.threads, n_threads_batch=args.threads, logits_all=False,
                verbose=False)
    vocab = llm.n_vocab()
    rng = random.Random(1234)

    def tokens(n):
        return [rng.randrange(vocab) for _ in range(n)]

    def pp(n):
        ids = tokens(n)
        llm.reset()
        return n / timed(lambda: llm.eval(ids))

    def tg(n):
        prompt, ids = tokens(args.tg_prompt), tokens(n)
        llm.reset()
        llm.eval(prompt)

        def run():
            for t in ids:
                llm.eval([t])

        return n / timed(run)

    tests = []
    if args.n_prompt > 0:
        pp(min(args.n_prompt, 64))
        s = [pp(args.n_prompt) for _ in range(args.repetitions)]
        tests.append({"test": f"pp{args.n_prompt}", "samples_ts": s})
    if args.n_gen > 0:
        tg(2)
        s = [tg(args.n_gen) for _ in range(args.repetitions)]
        tests.append({"test": f"tg{args.n_gen}", "samples_ts": s})
    for t in tests:
        t["avg_ts"] = statistics.mean(t["samples_ts"])
        t["stddev_ts"] = statistics.stdev(t["samples_ts"]) if len(t["samples_ts"]) > 1 else 0.0
    print(json.dumps({
        "peer": "llama.cpp via llama-cpp-python " + llama_cpp.__version__,
        "system_info": llama_cpp.llama_print_system_info().decode(),
        "model": os.path.abspath(args.model),
        "threads": args.threads,
        "loadavg_1m": os.getloadavg()[0],
        "tests": tests,
    }, indent=2))


def embedding_test(args):
    import llama_cpp
    from llama_cpp import Llama

    n, p = args.embedding, args.n_prompt
    llm = Llama(model_path=args.model, embedding=True, n_ctx=n * p, n_batch=n * p,
                n_ubatch=n * p, n_seq_max=n, n_threads=args.threads,
                n_threads_batch=args.threads, verbose=False)
    rng = random.Random(1234)
    texts = [[rng.randrange(llm.n_vocab()) for _ in range(p)] for _ in range(n)]

    def run():
        llm._ctx.kv_cache_clear()
        llm._batch.reset()
        for i, ids in enumerate(texts):
            llm._batch.add_sequence(ids, i, True)
        llm._ctx.decode(llm._batch)

    run()
    s = [n * p / timed(run) for _ in range(args.repetitions)]
    print(json.dumps({
        "peer": "llama.cpp via llama-cpp-python " + llama_cpp.__version__,
        "model": os.path.abspath(args.model),
        "threads": args.threads,
        "loadavg_1m": os.getloadavg()[0],
        "tests": [{"test": f"emb {p} x {n}", "samples_ts": s, "avg_ts": statistics.mean(s),
                   "stddev_ts": statistics.stdev(s) if len(s) > 1 else 0.0}],
    }, indent=2))


if __name__ == "__main__":
    main()
