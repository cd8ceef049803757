// A read-only view of a whole file through mmap. Model data is reached through it without copies;
// streamed experts are NOT (they use pread on fd(), see moe/), so that they never enter the
// process's resident set through the mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ts {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

  // "" while the open file is as it was at open (same size and modification time); else one line
  // naming the file and what changed. A rewrite in place shows through the mapping and the
  // positional reads alike, so bytes read after it are no longer the model's; a file replaced by
  // a rename is not a change here (the descriptor keeps the old file's bytes). One fstat.
  std::string change() const;

 private:
  std::string path_;
  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  int64_t mtime_ns_ = 0;
};

}  // namespace ts
