// Split GGUF models (llama.cpp's gguf-split / gguf-py's split_max_tensors layout): the bundled
// model cut into parts with the project's writer, laid out as gguf-py lays them out (the metadata
// and the split.* keys in the first part, only the split.* keys in the others, at most N tensors a
// part). Opened from any part, it must give the logits of the single file bit for bit, resident
// and with its experts streamed from whichever part holds them; each malformed set (a part
// missing, split.count or split.no disagreeing, a tensor in two parts, a part cut short, a file
// renamed) must be refused at open with a one-line error naming the problem, exit 2 from the CLI.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "fixture_models.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats_test_util.h"
#include "test_paths.h"

namespace ts {
namespace {

using test::throws_ts_error;

std::string bundled_model() {
  return test::repo_dir() + "/models/tiny-moe-q8_0.gguf";
}

std::string part_name(const std::string& prefix, int no, int count) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "-%05d-of-%05d.gguf", no + 1, count);
  return prefix + buf;
}

// Adds to part `part`'s writer before it is written (a malformed set).
using Spoil = std::function<void(int part, GgufWriter& w)>;

// Writes `src` as PREFIX-0000k-of-0000n.gguf with at most `max_tensors` tensors a part, the split
// keys as gguf-py writes them (u16 no and count, i32 tensor count). Returns the part paths.
std::vector<std::string> write_split(const std::string& src, const std::string& prefix,
                                     size_t max_tensors, const Spoil& spoil = nullptr) {
  const auto g = GgufFile::open(src);
  const std::vector<GgufTensor>& tensors = g->tensors();
  const int count = static_cast<int>((tensors.size() + max_tensors - 1) / max_tensors);
  std::vector<std::string> paths;
  for (int k = 0; k < count; ++k) {
    GgufWriter w;
    if (k == 0)
      for (const auto& [key, value] : g->metadata())
        if (key != "general.alignment") w.add_kv(key, value);
    w.set_alignment(static_cast<uint32_t>(g->alignment()));
    w.add_kv("split.no", gguf_int(GgufType::U16, k));
    w.add_kv("split.count", gguf_int(GgufType::U16, count));
    w.add_kv("split.tensors.count", gguf_int(GgufType::I32, static_cast<int64_t>(tensors.size())));
    for (size_t i = k * max_tensors; i < std::min(tensors.size(), (k + 1) * max_tensors); ++i) {
      const GgufTensor& t = tensors[i];
      w.add_tensor(t.name, t.dtype, t.dims, g->tensor_data(t), t.nbytes);
    }
    if (spoil) spoil(k, w);
    paths.push_back(part_name(prefix, k, count));
    w.write(paths.back());
  }
  return paths;
}

class GgufSplit : public ::testing::Test {
 protected:
  std::string prefix(const std::string& name) const { return dir_.file(name); }
  test::TempDir dir_;
};

TEST_F(GgufSplit, OpensFromAnyPartWithEveryTensor) {
  const auto single = GgufFile::open(bundled_model());
  const std::vector<std::string> parts = write_split(bundled_model(), prefix("m"), 10);
  ASSERT_GE(parts.size(), 3u);
  for (const std::string& opened : {parts.front(), parts[1], parts.back()}) {
    const auto g = GgufFile::open(opened);
    EXPECT_EQ(g->part_count(), parts.size());
    EXPECT_EQ(g->path(), parts.front());  // the metadata's part
    EXPECT_EQ(g->get_string("general.architecture"), single->get_string("general.architecture"));
    ASSERT_EQ(g->tensors().size(), single->tensors().size());
    for (const GgufTensor& want : single->tensors()) {
      const GgufTensor* t = g->tensor(want.name);
      ASSERT_NE(t, nullptr) << want.name;
      EXPECT_EQ(t->dims, want.dims);
      EXPECT_EQ(t->dtype, want.dtype);
      EXPECT_EQ(g->file(t->part).path(), parts[t->part]);
      EXPECT_EQ(std::memcmp(g->tensor_data(*t), single->tensor_data(want), want.nbytes), 0)
          << want.name;
    }
  }
  // Opened alone, a part is just its own tensors.
  EXPECT_EQ(GgufFile::open_single(parts[1])->tensors().size(), 10u);
}

// Same logits bit for bit: resident, and with the experts streamed from their parts (2 slots a
// layer, so experts are read again and again, each from the part that holds it).
TEST_F(GgufSplit, SameLogitsAsTheSingleFile) {
  const std::vector<std::string> parts = write_split(bundled_model(), prefix("m"), 7);
  const std::vector<int32_t> ids = {1, 450, 725, 2989, 278, 434, 1709, 304, 278, 3762, 2889};
  for (int64_t slots : {int64_t{0}, int64_t{2}}) {
    const auto want = test::run_logits(bundled_model(), ids, {.slots = slots});
    for (const std::string& opened : {parts.front(), parts.back()}) {
      const auto got = test::run_logits(opened, ids, {.slots = slots});
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
          << "opened " << opened << ", " << slots << " expert slots";
    }
  }
}

// The parts gguf-py's own writer makes (tests/tools/split_gguf.py), when python3 and gguf-py are
// there: the same logits too.
TEST_F(GgufSplit, GgufPySplitGivesTheSameLogits) {
  if (test::run_command("python3 -c 'import gguf, numpy'") != 0)
    GTEST_SKIP() << "python3 with gguf-py absent (pip install gguf numpy)";
  std::string out;
  ASSERT_EQ(test::run_command("python3 " + test::repo_dir() + "/tests/tools/split_gguf.py " +
                                  bundled_model() + " " + prefix("py") + " 9 2>/dev/null",
                              &out),
            0)
      << out;
  const int n = static_cast<int>((GgufFile::open(bundled_model())->tensors().size() + 8) / 9);
  const std::vector<int32_t> ids = {1, 450, 725, 2989, 278, 434, 1709};
  const auto want = test::run_logits(bundled_model(), ids, {});
  for (const std::string& opened :
       {part_name(prefix("py"), 0, n), part_name(prefix("py"), n - 1, n)}) {
    ASSERT_TRUE(test::file_exists(opened)) << out;
    EXPECT_GT(GgufFile::open(opened)->part_count(), 1u);
    const auto got = test::run_logits(opened, ids, {.slots = 2});
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << opened;
  }
}

TEST_F(GgufSplit, MissingPart) {
  const std::vector<std::string> parts = write_split(bundled_model(), prefix("m"), 10);
  std::filesystem::remove(parts[1]);
  EXPECT_TRUE(throws_ts_error(
      [&] { GgufFile::open(parts[0]); }, ErrorKind::Model,
      "part 2 of " + std::to_string(parts.size()) + " of the split model is missing: " + parts[1]));
}

// Rewrites part `k` of a split with split.* keys of its own choosing.
void rewrite_split_keys(const std::string& path, int64_t no, int64_t count, int64_t n_tensors) {
  const auto g = GgufFile::open_single(path);
  GgufWriter w;
  for (const auto& [key, value] : g->metadata())
    if (key.rfind("split.", 0) != 0 && key != "general.alignment") w.add_kv(key, value);
  w.set_alignment(static_cast<uint32_t>(g->alignment()));
  w.add_kv("split.no", gguf_int(GgufType::U16, no));
  w.add_kv("split.count", gguf_int(GgufType::U16, count));
  w.add_kv("split.tensors.count", gguf_int(GgufType::I32, n_tensors));
  for (const GgufTensor& t : g->tensors())
    w.add_tensor(t.name, t.dtype, t.dims, g->tensor_data(t), t.nbytes);
  const std::vector<uint8_t> b = w.bytes();
  test::write_file(path, b);
}

TEST_F(GgufSplit, SplitKeysDisagree) {
  const auto parts = write_split(bundled_model(), prefix("m"), 10);
  const int64_t n = static_cast<int64_t>(parts.size());
  const int64_t tensors = static_cast<int64_t>(GgufFile::open(bundled_model())->tensors().size());
  rewrite_split_keys(parts[2], 2, n + 1, tensors);
  EXPECT_TRUE(throws_ts_error([&] { GgufFile::open(parts[0]); }, ErrorKind::Model,
                              parts[2] + ": split.count = " + std::to_string(n + 1) + ", but " +
                                  parts[0] + " says " + std::to_string(n)));
  rewrite_split_keys(parts[2], 1, n, tensors);
  EXPECT_TRUE(throws_ts_error([&] { GgufFile::open(parts[0]); }, ErrorKind::Model,
                              parts[2] + ": split.no = 1, but " + parts[0] + " says 2"));
  rewrite_split_keys(parts[2], 2, n, tensors + 1);
  EXPECT_TRUE(throws_ts_error([&] { GgufFile::open(parts[0]); }, ErrorKind::Model,
                              "split.tensors.count = " + std::to_string(tensors + 1) + ", but"));
  // Every part agreeing on a count that the parts do not hold.
  for (int64_t k = 0; k < n; ++k) rewrite_split_keys(parts[k], k, n, tensors + 1);
  EXPECT_TRUE(throws_ts_error([&] { GgufFile::open(parts[1]); }, ErrorKind::Model,
                              "split.tensors.count = " + std::to_string(tensors + 1) +
                                  ", but its " + std::to_string(n) + " parts hold " +
                                  std::to_string(tensors) + " tensors"));
}

TEST_F(GgufSplit, TensorInTwoParts) {
  const auto g = GgufFile::open(bundled_model());
  const GgufTensor& first = g->tensors().front();
  const std::vector<uint8_t> bytes(g->tensor_data(first), g->tensor_data(first) + first.nbytes);
  const auto parts = write_split(bundled_model(), prefix("m"), 10, [&](int k, GgufWriter& w) {
    if (k == 2) w.add_tensor(first.name, first.dtype, first.dims, bytes.data(), bytes.size());
  });
  EXPECT_TRUE(throws_ts_error(
      [&] { GgufFile::open(parts[0]); }, ErrorKind::Model,
      parts[2] + ": tensor '" + first.name + "' is also in part 1 of the split model"));
}

TEST_F(GgufSplit, TruncatedPart) {
  const auto parts = write_split(bundled_model(), prefix("m"), 10);
  const auto size = std::filesystem::file_size(parts[1]);
  std::filesystem::resize_file(parts[1], size - 100);
  EXPECT_TRUE(throws_ts_error([&] { GgufFile::open(parts[0]); }, ErrorKind::Model,
                              parts[1] + ": tensor '"));
  EXPECT_TRUE(throws_ts_error([&] { GgufFile::open(parts[0]); }, ErrorKind::Model,
                              "run past the end of the file"));
}

TEST_F(GgufSplit, RenamedPartAndBadKeys) {
  const auto parts = write_split(bundled_model(), prefix("m"), 10);
  const std::string renamed = dir_.file("renamed.gguf");
  std::filesystem::copy_file(parts[0], renamed);
  EXPECT_TRUE(throws_ts_error([&] { GgufFile::open(renamed); }, ErrorKind::Model,
                              "must be named PREFIX-00001-of-0000"));
  const int64_t n = static_cast<int64_t>(parts.size());
  rewrite_split_keys(parts[0], n, n, 1);
  EXPECT_TRUE(
      throws_ts_error([&] { GgufFile::open(parts[0]); }, ErrorKind::Model,
                      "split.no = " + std::to_string(n) + " is out of range for split.count"));
  rewrite_split_keys(parts[0], 0, 0, 1);
  EXPECT_TRUE(throws_ts_error([&] { GgufFile::open(parts[0]); }, ErrorKind::Model,
                              "split.count = 0 is out of range (1..65535)"));
  // A part without the count, or with the count as a string: named.
  GgufWriter w;
  w.add_kv("split.no", gguf_int(GgufType::U16, 0));
  w.write(dir_.file("nocount-00001-of-00002.gguf"));
  EXPECT_TRUE(throws_ts_error([&] { GgufFile::open(dir_.file("nocount-00001-of-00002.gguf")); },
                              ErrorKind::Model, "split.no = 0 but split.count is missing"));
  GgufWriter s;
  s.add_kv("split.count", gguf_string("2"));
  s.write(dir_.file("str.gguf"));
  EXPECT_TRUE(throws_ts_error([&] { GgufFile::open(dir_.file("str.gguf")); }, ErrorKind::Model,
                              "metadata 'split.count' has type string, expected an integer"));
}

// The CLI: a split opens (inspect lists every tensor), a missing part is exit 2 with one line.
TEST_F(GgufSplit, CliExitCodes) {
  const auto parts = write_split(bundled_model(), prefix("m"), 10);
  std::string out;
  EXPECT_EQ(test::run_command(test::binary_path() + " inspect " + parts[1] + " >/dev/null", &out),
            0)
      << out;
  std::filesystem::remove(parts.back());
  out.clear();
  EXPECT_EQ(test::run_command(test::binary_path() + " inspect " + parts[0], &out), 2) << out;
  EXPECT_NE(out.find("of the split model is missing"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

}  // namespace
}  // namespace ts
