// Expert reads through io_uring: many reads in flight at once (a queue deep enough to keep an SSD
// busy), O_DIRECT where the file system takes it (reads that bypass the page cache, so the budget
// the expert slots were given is the whole footprint), demand reads ahead of prefetches. A range
// the device's alignment does not allow is read as its aligned cover into a staging buffer and
// copied out. Built only with liburing; where io_uring is not allowed (seccomp, old kernel)
// open() says so in one line and returns null, and the experts are read with pread.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ts {

enum class ExpertIo {
  // Pread when every routed expert fits in the memory the slots leave available (the page cache
  // then holds them all after one read), else Direct.
  Auto,
  Direct,    // io_uring, O_DIRECT: the page cache is not used
  Buffered,  // io_uring through the page cache
  Pread,     // positional reads from reader threads, through the page cache
};
ExpertIo expert_io_from_name(const std::string& name);
const char* expert_io_name(ExpertIo io);
// MemAvailable of /proc/meminfo in bytes (0 where it can't be read).
uint64_t available_memory();

class UringReader {
 public:
  // One range of a file to read into memory.
  struct Range {
    int fd = -1;       // a descriptor of the file (opened without O_DIRECT)
    std::string path;  // the file, for O_DIRECT's own descriptor and for errors
    uint64_t offset = 0;
    uint64_t bytes = 0;
    uint8_t* dst = nullptr;
  };
  // Called once on the completion thread when every range is in (null) or one failed (the
  // error, naming `what`). It should hand heavy work to another thread.
  using Done = std::function<void(std::exception_ptr)>;
  class Read;
  using Ticket = std::shared_ptr<Read>;

  // Null when this build has no liburing or the kernel refuses io_uring (one line on stderr).
  static std::unique_ptr<UringReader> open(bool direct);
  ~UringReader();
  UringReader(const UringReader&) = delete;
  UringReader& operator=(const UringReader&) = delete;

  Ticket read(std::vector<Range> ranges, bool demand, std::string what, Done done);
  // A prefetch that became a demand: its pieces not yet submitted go ahead of other prefetches.
  void promote(const Ticket& t);
  bool direct() const;

  // The file's O_DIRECT read rate in bytes/s: `bytes` read in 1 MiB pieces spread over the file,
  // at this reader's queue depth. 0 where the file can't be read with O_DIRECT.
  static double measure_direct_rate(const std::string& path, uint64_t bytes);

  struct Impl;

 private:
  explicit UringReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ts
