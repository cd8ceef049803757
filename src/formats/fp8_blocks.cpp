#include "formats/fp8_blocks.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "quant/dequant.h"

namespace ts {
namespace {

std::string shape_of(uint64_t rows, uint64_t cols) {
  return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

// The scale of each block, as float32, after checking the scale tensor against the weight.
std::vector<float> block_scales(const Fp8Weight& w, uint64_t rows, uint64_t cols,
                                uint64_t block_rows, uint64_t block_cols,
                                const std::string& where) {
  const std::string& name = w.weight->name;
  if (w.scale == nullptr)
    fail(ErrorKind::Model, where + ": FP8 tensor '" + name + "' has no '" + name + "_scale_inv'");
  const uint64_t br = (rows + block_rows - 1) / block_rows;
  const uint64_t bc = (cols + block_cols - 1) / block_cols;
  const SafetensorsTensor& s = *w.scale;
  const bool shaped = s.dims.size() == 2 && s.dims[0] == bc && s.dims[1] == br;
  if (!shaped || (s.dtype != DType::F32 && s.dtype != DType::BF16)) {
    std::string got = "[";
    for (size_t i = s.dims.size(); i-- > 0;) got += std::to_string(s.dims[i]) + (i ? ", " : "");
    fail(ErrorKind::Model, where + ": tensor '" + s.name + "' is " + dtype_name(s.dtype) + " " +
                               got + "], expected f32 or bf16 " + shape_of(br, bc) +
                               " (one scale per " + std::to_string(block_rows) + " x " +
                               std::to_string(block_cols) + " block of '" + name + "' " +
                               shape_of(rows, cols) + ")");
  }
  std::vector<float> out(static_cast<size_t>(br * bc));
  const uint8_t* p = w.scale_file->tensor_data(s);
  for (size_t i = 0; i < out.size(); ++i) {
    if (s.dtype == DType::F32) {
      std::memcpy(&out[i], p + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[i] = bf16_to_f32(h);
    }
  }
  return out;
}

// An anonymous file of `bytes`, mapped for writing; the caller unmaps it.
int anonymous_file(uint64_t bytes, const std::string& where, uint8_t** map) {
  const int fd = ::memfd_create("turbospark-fp8-dequantised", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0)
    fail(ErrorKind::Model,
         where + ": cannot make " + std::to_string(bytes) +
             " bytes of memory for the dequantised FP8 weights: " + std::strerror(errno));
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    ::close(fd);
    fail(ErrorKind::Model,
         where + ": cannot map the dequantised FP8 weights: " + std::strerror(errno));
  }
  *map = static_cast<uint8_t*>(p);
  return fd;
}

}  // namespace

float fp8_e4m3_value(uint8_t b) {
  const int e = (b >> 3) & 0xF, m = b & 7;
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  if (e == 0xF && m == 7) return NAN;
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -9);  // subnormal: m/8 x 2^-6
  return sign * std::ldexp(static_cast<float>(8 + m), e - 10);      // (1 + m/8) x 2^(e-7)
}

std::unique_ptr<SafetensorsFile> dequantise_fp8_blocks(const std::vector<Fp8Weight>& weights,
                                                       int64_t block_rows, int64_t block_cols,
                                                       const std::string& where) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t data = 0;
  for (const Fp8Weight& w : weights) {
    if (w.weight->dims.size() != 2)
      fail(ErrorKind::Model, where + ": FP8 tensor '" + w.weight->name + "' is not 2-D");
    const uint64_t rows = w.weight->dims[1], cols = w.weight->dims[0];
    header[w.weight->name] = {{"dtype", "F32"},
                              {"shape", {rows, cols}},
                              {"data_offsets", {data, data + rows * cols * 4}}};
    data += rows * cols * 4;
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  const uint64_t begin = 8 + text.size();
  uint8_t* map = nullptr;
  const int fd = anonymous_file(begin + data, where, &map);
  const uint64_t len = text.size();
  std::memcpy(map, &len, 8);
  std::memcpy(map + 8, text.data(), text.size());
  float lut[256];
  for (int b = 0; b < 256; ++b) lut[b] = fp8_e4m3_value(static_cast<uint8_t>(b));
  uint64_t at = begin;
  for (const Fp8Weight& w : weights) {
    const uint64_t rows = w.weight->dims[1], cols = w.weight->dims[0];
    const auto br = static_cast<uint64_t>(block_rows), bc = static_cast<uint64_t>(block_cols);
    const std::vector<float> scale = block_scales(w, rows, cols, br, bc, where);
    const uint64_t blocks_per_row = (cols + bc - 1) / bc;
    const uint8_t* q = w.weight_file->tensor_data(*w.weight);
    auto* out = reinterpret_cast<float*>(map + at);
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t c = 0; c < cols; ++c)
        out[r * cols + c] = lut[q[r * cols + c]] * scale[(r / br) * blocks_per_row + c / bc];
    at += rows * cols * 4;
  }
  ::munmap(map, begin + data);
  auto file = SafetensorsFile::open("/proc/self/fd/" + std::to_string(fd));
  ::close(fd);
  return file;
}

}  // namespace ts
