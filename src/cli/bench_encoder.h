// `bench` of an encoder model (BERT, nomic-bert: runtime/encoder.h): the embedding test, as
// llama-bench runs its prompt test with -embd 1. "emb P x N" encodes N texts of P random token
// ids in one pass (the server's --parallel N); tokens/s counts all of them. One untimed pass first,
// then the repetitions. With --roofline, each figure as a fraction of the arithmetic bound: the
// pass's multiply-adds (every projection of every token, the attention's q.k and p.v over its
// text) at the peak measured in the same run of the kernels the weights take: f32 FMA for f32,
// f16 and bf16 matrices, int8 dot products for quantised ones (the attention is a small share).
#pragma once

#include <cstdint>
#include <string>

namespace ts::cli {

struct EncoderBenchArgs {
  std::string path;
  std::string backend;
  int threads = 0;  // 0: physical cores
  int64_t tokens = 512;
  int64_t texts = 1;
  int reps = 5;
  bool json = false;
  bool roofline = false;
};

int bench_encoder(const EncoderBenchArgs& a);

}  // namespace ts::cli
