// MappedFile::change: a file rewritten in place after it was opened is noticed (the server stops
// serving from it), and an untouched one, or one replaced by a rename, is not.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "core/mapped_file.h"

namespace ts {
namespace {

namespace fs = std::filesystem;

class MappedFileChange : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("ts_mapped_" + std::to_string(::getpid()))).string();
    write("0123456789");
  }
  void TearDown() override { fs::remove(path_); }

  void write(const std::string& bytes, std::ios::openmode mode = std::ios::binary) {
    std::ofstream f(path_, mode);
    f << bytes;
  }

  std::string path_;
};

TEST_F(MappedFileChange, UntouchedIsNoChange) {
  const MappedFile f(path_);
  EXPECT_EQ(f.change(), "");
  EXPECT_EQ(f.change(), "");
}

TEST_F(MappedFileChange, RewriteInPlaceOfTheSameSizeIsNoticed) {
  const MappedFile f(path_);
  // Timestamps are as fine as the file system keeps them: make sure the write lands later.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  {
    std::fstream io(path_, std::ios::binary | std::ios::in | std::ios::out);
    io.seekp(3);
    io << "X";
  }
  EXPECT_EQ(f.data()[3], 'X');  // what the mapping serves now: no longer the model's bytes
  EXPECT_EQ(f.change(), path_ + ": the file was rewritten since it was opened");
}

TEST_F(MappedFileChange, GrowthIsNoticed) {
  const MappedFile f(path_);
  write("more", std::ios::binary | std::ios::app);
  EXPECT_EQ(f.change(), path_ + ": the file changed size since it was opened (10 -> 14 bytes)");
}

TEST_F(MappedFileChange, ReplacementByRenameKeepsTheOpenFile) {
  const MappedFile f(path_);
  const std::string other = path_ + ".new";
  {
    std::ofstream o(other, std::ios::binary);
    o << "abcdefghijklmnop";
  }
  fs::rename(other, path_);
  EXPECT_EQ(f.change(), "");
  EXPECT_EQ(f.data()[0], '0');
}

}  // namespace
}  // namespace ts
