// The image fuzzer's harness without libFuzzer: every seed in fuzz/corpus/image and the test
// images, and a few thousand deterministic mutations of them (bit flips, cut ends, bytes
// overwritten or inserted), through the decoders and the processor. Each must be refused with a
// ts::Error or give a well-formed result (fuzz/image_harness.h aborts otherwise).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

#include "../../fuzz/image_harness.h"
#include "test_paths.h"

namespace ts {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

std::vector<Bytes> seeds() {
  std::vector<Bytes> out;
  for (const fs::path dir : {fs::path(test::repo_dir()) / "fuzz/corpus/image",
                             fs::path(test::fixtures_dir()) / "images"}) {
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".png" && ext != ".jpg" && ext != ".webp") continue;
      std::ifstream in(e.path(), std::ios::binary);
      out.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  return out;
}

TEST(ImageFuzzReplay, SeedsAndMutationsAreRefusedOrWellFormed) {
  const std::vector<Bytes> all = seeds();
  ASSERT_GE(all.size(), 8u);
  std::mt19937 rng(34);
  int64_t inputs = 0;
  for (const Bytes& seed : all) {
    fuzz::check_image(seed.data(), seed.size());
    for (int m = 0; m < 300; ++m) {
      Bytes b = seed;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !b.empty(); ++e) {
        const size_t at = rng() % b.size();
        switch (rng() % 4) {
          case 0:
            b[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
            break;
          case 1:
            b.resize(at);
            break;
          case 2:
            b[at] = static_cast<uint8_t>(rng());
            break;
          default:
            b.insert(b.begin() + static_cast<long>(at), static_cast<uint8_t>(rng()));
        }
      }
      fuzz::check_image(b.data(), b.size());
      ++inputs;
    }
  }
  EXPECT_GT(inputs, 2000);
}

}  // namespace
}  // namespace ts
