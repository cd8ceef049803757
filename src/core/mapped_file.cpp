#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/error.h"

namespace ts {
namespace {

int64_t mtime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO named as a model would otherwise wait forever for a writer; it has
  // no effect on the reads and the mapping of a regular file.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) fail(ErrorKind::Model, path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fail(ErrorKind::Model, path + ": not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
  mtime_ns_ = mtime_ns(st);
  if (size_ == 0) return;  // mmap of length 0 fails; an empty file is reported by its parser
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    ::close(fd_);
    fail(ErrorKind::Model, path + ": mmap failed: " + std::strerror(err));
  }
  data_ = static_cast<const uint8_t*>(p);
}

std::string MappedFile::change() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return path_ + ": cannot stat the open file: " + std::strerror(errno);
  if (static_cast<uint64_t>(st.st_size) != size_)
    return path_ + ": the file changed size since it was opened (" + std::to_string(size_) +
           " -> " + std::to_string(st.st_size) + " bytes)";
  if (mtime_ns(st) != mtime_ns_) return path_ + ": the file was rewritten since it was opened";
  return "";
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace ts
