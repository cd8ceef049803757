// Helpers shared by the GGUF / safetensors tests: a scratch directory, byte patching, safetensors
// files built from a header string, and an assertion on ts::Error's kind and message.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"

namespace ts::test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ts_formats_XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const void* data, size_t n) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  if (!f) ADD_FAILURE() << "cannot write " << path;
}
inline void write_file(const std::string& path, const std::vector<uint8_t>& b) {
  write_file(path, b.data(), b.size());
}
inline void write_file(const std::string& path, const std::string& s) {
  write_file(path, s.data(), s.size());
}

template <typename T>
void patch(std::vector<uint8_t>& b, uint64_t at, T v) {
  ASSERT_LE(at + sizeof(T), b.size());
  std::memcpy(b.data() + at, &v, sizeof(T));
}

// A safetensors file: 8-byte little-endian header length, the header, then the data.
inline std::vector<uint8_t> safetensors_bytes(const std::string& header,
                                              const std::vector<uint8_t>& data) {
  const uint64_t n = header.size();
  std::vector<uint8_t> b(8 + n + data.size());
  std::memcpy(b.data(), &n, 8);
  std::memcpy(b.data() + 8, header.data(), n);
  if (!data.empty()) std::memcpy(b.data() + 8 + n, data.data(), data.size());
  return b;
}

// Success when `fn` throws a one-line ts::Error of `kind` whose message contains one of `needles`.
inline ::testing::AssertionResult throws_ts_error_any(const std::function<void()>& fn,
                                                      ErrorKind kind,
                                                      const std::vector<std::string>& needles) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (e.kind() != kind)
      return ::testing::AssertionFailure()
             << "wrong error kind " << static_cast<int>(e.kind()) << ": " << msg;
    if (msg.find('\n') != std::string::npos)
      return ::testing::AssertionFailure() << "multi-line message: " << msg;
    for (const std::string& needle : needles)
      if (msg.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "message lacks '" << needles.front() << "': " << msg;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "not a ts::Error: " << e.what();
  }
  return ::testing::AssertionFailure() << "no error thrown (expected '" << needles.front() << "')";
}

inline ::testing::AssertionResult throws_ts_error(const std::function<void()>& fn, ErrorKind kind,
                                                  const std::string& needle) {
  return throws_ts_error_any(fn, kind, {needle});
}

}  // namespace ts::test
