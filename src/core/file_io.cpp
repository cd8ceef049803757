#include "core/file_io.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ts {

void read_exact(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& what,
                ErrorKind kind) {
  auto* p = static_cast<uint8_t*>(dst);
  uint64_t done = 0;
  while (done < n) {
    // Linux caps one read at about 2 GiB; larger experts are read in pieces.
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n - done, 1u << 30));
    const ssize_t r = ::pread(fd, p + done, chunk, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0)
      fail(kind, what + ": read failed at offset " + std::to_string(offset + done) + ": " +
                     std::strerror(errno));
    if (r == 0)
      fail(kind, what + ": short read: " + std::to_string(done) + " of " + std::to_string(n) +
                     " bytes at offset " + std::to_string(offset) + " (file truncated?)");
    done += static_cast<uint64_t>(r);
  }
}

}  // namespace ts
