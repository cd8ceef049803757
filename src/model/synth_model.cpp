#include "model/synth_model.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/checked.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/gguf_writer.h"
#include "model/synth_shapes.h"
#include "model/synth_vocab.h"
#include "quant/quantize.h"

namespace ts {
namespace {

constexpr uint64_t kAlignment = 32;          // GGUF's default: no general.alignment key
constexpr uint64_t kChunkBytes = 32u << 20;  // output generated and written per step

enum class Init { Norm, Matrix, RopeFreqs };

struct PlannedTensor {
  std::string name;
  DType dtype;
  std::vector<uint64_t> dims;  // GGML order: dims[0] is the row
  Init init;
  uint64_t offset = 0;  // in the data section
  uint64_t nbytes = 0;
  uint64_t rows() const {
    uint64_t r = 1;
    for (size_t i = 1; i < dims.size(); ++i) r *= dims[i];
    return r;
  }
};

struct Plan {
  const SynthShape* shape = nullptr;
  int64_t layers = 0;
  std::vector<PlannedTensor> tensors;
  uint64_t data_bytes = 0;
  uint64_t params = 0;
};

// llama.cpp's general.file_type (llama_ftype) of a file whose matrices are all `t`.
int64_t file_type(DType t) {
  switch (t) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::Q4_0:
      return 2;
    case DType::Q4_1:
      return 3;
    case DType::Q8_0:
      return 7;
    case DType::Q5_0:
      return 8;
    case DType::Q5_1:
      return 9;
    case DType::Q2_K:
      return 10;
    case DType::Q3_K:
      return 11;  // Q3_K_S: every matrix q3_k
    case DType::Q4_K:
      return 14;  // Q4_K_S
    case DType::Q5_K:
      return 16;  // Q5_K_S
    case DType::Q6_K:
      return 18;
    case DType::IQ4_NL:
      return 25;
    case DType::IQ4_XS:
      return 30;
    case DType::BF16:
      return 32;
    case DType::MXFP4:
      return 38;  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
    default:
      fail(ErrorKind::Usage, std::string("--dtype: no GGUF file type for ") + dtype_name(t));
  }
}

// llama_ftype's LLAMA_FTYPE_MOSTLY_Q4_K_M and _Q5_K_M.
constexpr int64_t kFileTypeQ4_K_M = 15, kFileTypeQ5_K_M = 17;

// llama.cpp's use_more_bits(): the first and last eighth of the layers, and every third between.
bool more_bits_layer(int64_t l, int64_t n) {
  return l < n / 8 || l >= 7 * n / 8 || (l - n / 8) % 3 == 2;
}

// The dtype of one matrix; `more_bits` marks the tensors Q4_K_M / Q5_K_M raise to q6_k in this
// layer.
DType matrix_dtype(const SynthOptions& o, bool more_bits) {
  return o.k_m_mix && more_bits ? DType::Q6_K : o.dtype;
}

Plan make_plan(const SynthOptions& o) {
  Plan p;
  p.shape = &find_synth_shape(o.shape);
  const SynthShape& s = *p.shape;
  if (o.k_m_mix && o.dtype != DType::Q4_K && o.dtype != DType::Q5_K)
    fail(ErrorKind::Usage, std::string("--dtype: there is no K_M mix over ") + dtype_name(o.dtype));
  if (!can_quantize_weights(o.dtype))
    fail(ErrorKind::Usage, std::string("--dtype: ") + dtype_name(o.dtype) +
                               " is not a weight type this build can write");
  if (o.layers < 0 || o.layers > s.layers)
    fail(ErrorKind::Usage, "--layers: " + std::to_string(o.layers) + " is outside 1.." +
                               std::to_string(s.layers) + " for shape " + s.name);
  p.layers = o.layers == 0 ? s.layers : o.layers;
  const uint64_t d = static_cast<uint64_t>(s.hidden), hd = static_cast<uint64_t>(s.head_dim);
  const uint64_t q = static_cast<uint64_t>(s.heads) * hd,
                 kv = static_cast<uint64_t>(s.kv_heads) * hd;
  auto matrix = [&](std::string name, std::vector<uint64_t> dims, bool more_bits = false) {
    p.tensors.push_back(
        {std::move(name), matrix_dtype(o, more_bits), std::move(dims), Init::Matrix});
  };
  auto norm = [&](std::string name, uint64_t n) {
    p.tensors.push_back({std::move(name), DType::F32, {n}, Init::Norm});
  };
  matrix("token_embd.weight", {d, static_cast<uint64_t>(s.vocab)}, s.tied);
  if (s.rope_factor > 0)
    p.tensors.push_back({"rope_freqs.weight", DType::F32, {hd / 2}, Init::RopeFreqs});
  const bool qk_norm = std::string(s.arch) != "llama";
  for (int64_t l = 0; l < p.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const bool more_bits = more_bits_layer(l, p.layers);
    norm(b + "attn_norm.weight", d);
    matrix(b + "attn_q.weight", {d, q});
    matrix(b + "attn_k.weight", {d, kv});
    matrix(b + "attn_v.weight", {d, kv}, more_bits);
    matrix(b + "attn_output.weight", {q, d});
    if (qk_norm) {
      norm(b + "attn_q_norm.weight", hd);
      norm(b + "attn_k_norm.weight", hd);
    }
    norm(b + "ffn_norm.weight", d);
    if (s.experts == 0) {
      const uint64_t ff = static_cast<uint64_t>(s.ffn);
      matrix(b + "ffn_gate.weight", {d, ff});
      matrix(b + "ffn_up.weight", {d, ff});
      matrix(b + "ffn_down.weight", {ff, d}, more_bits);
    } else {
      const uint64_t ff = static_cast<uint64_t>(s.expert_ffn), e = static_cast<uint64_t>(s.experts);
      // The router stays f32, as llama.cpp's quantiser leaves it.
      p.tensors.push_back({b + "ffn_gate_inp.weight", DType::F32, {d, e}, Init::Matrix});
      matrix(b + "ffn_gate_exps.weight", {d, ff, e});
      matrix(b + "ffn_up_exps.weight", {d, ff, e});
      matrix(b + "ffn_down_exps.weight", {ff, d, e}, more_bits);
    }
  }
  norm("output_norm.weight", d);
  if (!s.tied) matrix("output.weight", {d, static_cast<uint64_t>(s.vocab)}, true);
  for (PlannedTensor& t : p.tensors) {
    const std::string what = std::string("shape ") + s.name + ": tensor '" + t.name + "'";
    if (t.dims[0] % dtype_info(t.dtype).block_elems != 0)
      fail(ErrorKind::Usage, what + " has rows of " + std::to_string(t.dims[0]) +
                                 ", not a whole number of " + dtype_name(t.dtype) + " blocks");
    t.nbytes = checked_mul(row_bytes(t.dtype, t.dims[0], what), t.rows(), what);
    t.offset = p.data_bytes;
    p.data_bytes = align_up(checked_add(p.data_bytes, t.nbytes, what), kAlignment, what);
    p.params += t.dims[0] * t.rows();
  }
  return p;
}

void add_metadata(GgufWriter& w, const Plan& p, const SynthOptions& o) {
  const SynthShape& s = *p.shape;
  const std::string a = s.arch;
  auto u32 = [&](const std::string& key, int64_t v) {
    w.add_kv(a + "." + key, gguf_int(GgufType::U32, v));
  };
  auto f32 = [&](const std::string& key, double v) {
    w.add_kv(a + "." + key, gguf_float(GgufType::F32, v));
  };
  w.add_kv("general.architecture", gguf_string(a));
  w.add_kv("general.type", gguf_string("model"));
  w.add_kv("general.name", gguf_string(std::string("synthetic ") + s.name));
  w.add_kv("general.description",
           gguf_string(std::string("random weights in the shape of ") + s.model +
                       " (turbospark synth, seed " + std::to_string(o.seed) + ", " +
                       std::to_string(p.layers) + " of " + std::to_string(s.layers) + " layers)"));
  w.add_kv("general.file_type",
           gguf_int(GgufType::U32, !o.k_m_mix               ? file_type(o.dtype)
                                   : o.dtype == DType::Q4_K ? kFileTypeQ4_K_M
                                                            : kFileTypeQ5_K_M));
  w.add_kv("general.quantization_version", gguf_int(GgufType::U32, 2));
  u32("vocab_size", s.vocab);
  u32("context_length", s.ctx);
  u32("embedding_length", s.hidden);
  u32("block_count", p.layers);
  u32("feed_forward_length", s.ffn);
  u32("attention.head_count", s.heads);
  u32("attention.head_count_kv", s.kv_heads);
  u32("attention.key_length", s.head_dim);
  u32("attention.value_length", s.head_dim);
  f32("rope.freq_base", s.rope_theta);
  f32("attention.layer_norm_rms_epsilon", s.rms_eps);
  if (a == "llama") u32("rope.dimension_count", s.head_dim);
  if (s.experts > 0) {
    u32("expert_count", s.experts);
    u32("expert_used_count", s.experts_used);
    if (a != "llama") u32("expert_feed_forward_length", s.expert_ffn);
  }
  add_synth_vocab(w, s.vocab);
}

// Metadata and tensor infos, padded to where the data section starts.
std::vector<uint8_t> header_bytes(const Plan& p, const SynthOptions& o) {
  GgufWriter w;
  add_metadata(w, p, o);
  for (const PlannedTensor& t : p.tensors)
    w.add_raw_tensor_info(t.name, static_cast<uint32_t>(t.dtype), t.dims, t.offset);
  return w.bytes();
}

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// Seeded by the tensor's name rather than its position, so a file cut to N layers holds exactly
// the first N layers of the full-depth file.
uint64_t tensor_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001B3ull;
  return mix64(mix64(seed + kGolden) ^ h);
}

// Uniform values in (-1, 1), two per 64-bit draw of a splitmix64 stream seeded per row.
void uniform_row(uint64_t tseed, uint64_t row, float* out, uint64_t n) {
  uint64_t state = mix64(tseed + row * kGolden);
  constexpr float kScale = 2.0f / 16777216.0f;
  for (uint64_t i = 0; i < n; i += 2) {
    state += kGolden;
    const uint64_t r = mix64(state);
    out[i] = (static_cast<float>(r >> 40) + 0.5f) * kScale - 1.0f;
    if (i + 1 < n) out[i + 1] = (static_cast<float>((r >> 16) & 0xFFFFFF) + 0.5f) * kScale - 1.0f;
  }
}

// llama3 rope scaling as GGUF states it: one divisor per rotary frequency (model/model_spec.cpp).
void rope_divisors(const SynthShape& s, float* out) {
  const int64_t half = s.head_dim / 2;
  const double old_ctx = static_cast<double>(s.rope_orig_ctx);
  for (int64_t i = 0; i < half; ++i) {
    const double freq =
        std::pow(s.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(s.head_dim));
    const double wavelen = 2.0 * M_PI / freq;
    double div = 1.0;
    if (wavelen > old_ctx / s.rope_low_freq) {
      div = s.rope_factor;
    } else if (wavelen >= old_ctx / s.rope_high_freq) {
      const double smooth =
          (old_ctx / wavelen - s.rope_low_freq) / (s.rope_high_freq - s.rope_low_freq);
      div = 1.0 / ((1.0 - smooth) / s.rope_factor + smooth);
    }
    out[i] = static_cast<float>(div);
  }
}

void fill_row(const Plan& p, const PlannedTensor& t, uint64_t tseed, uint64_t row, float* out) {
  const uint64_t n = t.dims[0];
  if (t.init == Init::RopeFreqs) return rope_divisors(*p.shape, out);
  uniform_row(tseed, row, out, n);
  if (t.init == Init::Norm) {
    for (uint64_t i = 0; i < n; ++i) out[i] = 1.0f + 0.05f * out[i];
    return;
  }
  // Uniform on (-a, a) has standard deviation a / sqrt(3).
  const float a = std::sqrt(3.0f / static_cast<float>(n));
  for (uint64_t i = 0; i < n; ++i) out[i] *= a;
}

void write_all(int fd, const void* data, uint64_t n, uint64_t offset, const std::string& path) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      fail(ErrorKind::Runtime, path + ": write failed: " + std::strerror(w < 0 ? errno : ENOSPC));
    p += w;
    n -= static_cast<uint64_t>(w);
    offset += static_cast<uint64_t>(w);
  }
}

void check_free_space(const std::string& path, uint64_t need) {
  std::filesystem::path dir = std::filesystem::absolute(path).parent_path();
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0)
    fail(ErrorKind::Usage, dir.string() + ": cannot check free space: " + std::strerror(errno));
  const uint64_t avail = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  if (avail < need) {
    char msg[256];
    std::snprintf(msg, sizeof msg, ": the model needs %.2f GB but only %.2f GB is free on %s",
                  need / 1e9, avail / 1e9, dir.c_str());
    fail(ErrorKind::Usage, path + msg);
  }
}

class FileGuard {
 public:
  explicit FileGuard(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail(ErrorKind::Usage, path_ + ": cannot create: " + std::strerror(errno));
  }
  ~FileGuard() {
    if (fd_ >= 0) ::close(fd_);
    if (!kept_) std::remove(path_.c_str());
  }
  int fd() const { return fd_; }
  void commit(const std::string& final_path) {
    if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
      fd_ = -1;
      fail(ErrorKind::Runtime, path_ + ": cannot flush: " + std::strerror(errno));
    }
    fd_ = -1;
    if (std::rename(path_.c_str(), final_path.c_str()) != 0)
      fail(ErrorKind::Runtime,
           final_path + ": cannot rename from " + path_ + ": " + std::strerror(errno));
    kept_ = true;
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool kept_ = false;
};

}  // namespace

SynthSummary plan_synth_model(const SynthOptions& o) {
  const Plan p = make_plan(o);
  return {header_bytes(p, o).size() + p.data_bytes, p.params,
          static_cast<int64_t>(p.tensors.size()), p.layers};
}

SynthSummary write_synth_model(const SynthOptions& o, const std::string& path,
                               const std::function<void(uint64_t, uint64_t)>& progress) {
  const Plan p = make_plan(o);
  const std::vector<uint8_t> header = header_bytes(p, o);
  const uint64_t total = header.size() + p.data_bytes;
  check_free_space(path, total);

  FileGuard file(path + ".part");
  write_all(file.fd(), header.data(), header.size(), 0, path);
  ThreadPool pool(o.threads > 0 ? o.threads : physical_cores());
  std::vector<uint8_t> chunk;
  uint64_t done = header.size();
  for (const PlannedTensor& t : p.tensors) {
    const uint64_t row_len = t.dims[0], rb = t.nbytes / t.rows();
    const uint64_t rows_per_chunk = std::max<uint64_t>(1, kChunkBytes / rb);
    const uint64_t tseed = tensor_seed(o.seed, t.name);
    for (uint64_t r0 = 0; r0 < t.rows(); r0 += rows_per_chunk) {
      const uint64_t nr = std::min(rows_per_chunk, t.rows() - r0);
      chunk.resize(nr * rb);
      pool.parallel_for(static_cast<int64_t>(nr), [&](int64_t begin, int64_t end) {
        std::vector<float> row(row_len);
        for (int64_t r = begin; r < end; ++r) {
          fill_row(p, t, tseed, r0 + static_cast<uint64_t>(r), row.data());
          quantize_row_weights(t.dtype, row.data(), chunk.data() + static_cast<uint64_t>(r) * rb,
                               static_cast<int64_t>(row_len));
        }
      });
      write_all(file.fd(), chunk.data(), chunk.size(), header.size() + t.offset + r0 * rb, path);
      done += chunk.size();
      if (progress) progress(done, total);
    }
  }
  // Padding after the last tensor, so the data section has the size the offsets imply.
  if (::ftruncate(file.fd(), static_cast<off_t>(total)) != 0)
    fail(ErrorKind::Runtime, path + ": cannot size the file: " + std::strerror(errno));
  file.commit(path);
  if (progress) progress(total, total);
  return {total, p.params, static_cast<int64_t>(p.tensors.size()), p.layers};
}

}  // namespace ts
