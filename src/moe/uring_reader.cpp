#include "moe/uring_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "moe/io_fault.h"

#if TS_HAVE_LIBURING
#include <liburing.h>
#endif

namespace ts {

ExpertIo expert_io_from_name(const std::string& name) {
  if (name == "auto") return ExpertIo::Auto;
  if (name == "direct") return ExpertIo::Direct;
  if (name == "buffered") return ExpertIo::Buffered;
  if (name == "pread") return ExpertIo::Pread;
  fail(ErrorKind::Usage, "unknown expert I/O mode '" + name + "' (auto, direct, buffered, pread)");
}

const char* expert_io_name(ExpertIo io) {
  switch (io) {
    case ExpertIo::Auto:
      return "auto";
    case ExpertIo::Direct:
      return "direct";
    case ExpertIo::Buffered:
      return "buffered";
    case ExpertIo::Pread:
      break;
  }
  return "pread";
}

uint64_t available_memory() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return 0;
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr)
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
  std::fclose(f);
  return static_cast<uint64_t>(kib) * 1024;
}

#if TS_HAVE_LIBURING
namespace {

// O_DIRECT wants file offsets, sizes and memory aligned to the device's logical block; 4096
// covers every device we meet.
constexpr uint64_t kAlign = 4096;
// Reads in flight: enough to keep an NVMe drive's queues busy with 1 MiB pieces.
constexpr unsigned kDepth = 64;
constexpr uint64_t kPiece = uint64_t{1} << 20;

uint64_t align_down(uint64_t x) {
  return x / kAlign * kAlign;
}
uint64_t align_up(uint64_t x) {
  return (x + kAlign - 1) / kAlign * kAlign;
}

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};
using Staging = std::unique_ptr<uint8_t, AlignedFree>;

Staging aligned_buffer(uint64_t bytes) {
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(kAlign, align_up(bytes)));
  if (p == nullptr)
    fail(ErrorKind::Runtime, "out of memory for a " + std::to_string(bytes) + "-byte read buffer");
  return Staging(p);
}

}  // namespace

class UringReader::Read {
 public:
  // One submission: file bytes [offset, offset + bytes) into buf; at least `need` of them must
  // arrive (the rest of an aligned cover may lie past the end of the file). Bytes
  // [copy_from, copy_from + copy_bytes) of buf then go to copy_to (staged reads).
  struct Piece {
    int fd = -1;
    uint64_t offset = 0;
    uint32_t bytes = 0;
    uint32_t need = 0;
    uint8_t* buf = nullptr;
    uint8_t* copy_to = nullptr;
    uint64_t copy_from = 0;
    uint64_t copy_bytes = 0;
    Read* read = nullptr;
    uint32_t done = 0;  // bytes in so far (a read may return fewer than asked; the rest follows)
  };
  std::vector<Piece> pieces;
  std::vector<Staging> staging;
  std::string what;
  Done done;
  bool demand = false;
  size_t left = 0;  // pieces not yet completed (completion thread only)
  std::exception_ptr error;
};

struct UringReader::Impl {
  io_uring ring{};
  bool direct = false;
  std::mutex mu;
  std::condition_variable idle;
  std::deque<Read::Piece*> demand, prefetch;
  // Reads with pieces outstanding, kept alive until their last piece completes.
  std::map<Read*, Ticket> live;
  unsigned inflight = 0;
  bool stop = false;
  std::map<std::string, int> direct_fds;  // per file: its O_DIRECT descriptor, or -1
  std::thread reaper;

  ~Impl() {
    for (const auto& [path, fd] : direct_fds)
      if (fd >= 0) ::close(fd);
  }

  // The descriptor to read `r` through and whether it is O_DIRECT. A file system that refuses
  // O_DIRECT (tmpfs) is read through the page cache instead.
  std::pair<int, bool> descriptor(const Range& r) {
    if (!direct) return {r.fd, false};
    auto it = direct_fds.find(r.path);
    if (it == direct_fds.end())
      it =
          direct_fds.emplace(r.path, ::open(r.path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC)).first;
    return it->second >= 0 ? std::pair{it->second, true} : std::pair{r.fd, false};
  }

  void add_pieces(Read& read, const Range& r) {
    const auto [fd, odirect] = descriptor(r);
    const bool in_place = !odirect || (r.offset % kAlign == 0 && r.bytes % kAlign == 0 &&
                                       reinterpret_cast<uintptr_t>(r.dst) % kAlign == 0);
    if (in_place) {
      for (uint64_t b = 0; b < r.bytes; b += kPiece) {
        const auto n = static_cast<uint32_t>(std::min(kPiece, r.bytes - b));
        read.pieces.push_back({fd, r.offset + b, n, n, r.dst + b, nullptr, 0, 0, &read});
      }
      return;
    }
    // The aligned cover of the range into a staging buffer; each piece copies out its share.
    const uint64_t first = align_down(r.offset), last = align_up(r.offset + r.bytes);
    read.staging.push_back(aligned_buffer(last - first));
    uint8_t* buf = read.staging.back().get();
    for (uint64_t o = first; o < last; o += kPiece) {
      const uint64_t n = std::min(kPiece, last - o);
      const uint64_t lo = std::max(o, r.offset), hi = std::min(o + n, r.offset + r.bytes);
      const auto need = static_cast<uint32_t>(hi - o);
      read.pieces.push_back({fd, o, static_cast<uint32_t>(n), need, buf + (o - first),
                             r.dst + (lo - r.offset), lo - o, hi - lo, &read});
    }
  }

  // Under mu: fills the ring from the queues, demand first.
  void pump() {
    unsigned queued = 0;
    while (inflight < kDepth && (!demand.empty() || !prefetch.empty())) {
      std::deque<Read::Piece*>& q = !demand.empty() ? demand : prefetch;
      Read::Piece* p = q.front();
      q.pop_front();
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      io_uring_prep_read(sqe, p->fd, p->buf + p->done, p->bytes - p->done, p->offset + p->done);
      io_uring_sqe_set_data(sqe, p);
      ++inflight;
      ++queued;
    }
    if (queued > 0) io_uring_submit(&ring);
  }

  // The piece's read returned `res`. Returns false when the piece goes round again (a partial
  // read short of `need`, which buffered reads may return).
  bool complete(Read::Piece& p, int res) {
    Read& r = *p.read;
    const IoFault fault = take_io_fault();
    if (fault == IoFault::Error) res = -EIO;
    const bool eof = res == 0 || fault == IoFault::Short;
    if (fault == IoFault::Short && res > 0) res = static_cast<int>((p.need - p.done) / 2);
    if (res > 0) p.done += static_cast<uint32_t>(res);
    if (res > 0 && p.done < p.need && !eof) return false;
    if (!r.error && res < 0)
      r.error = std::make_exception_ptr(
          Error(ErrorKind::Runtime, r.what + ": read failed at offset " + std::to_string(p.offset) +
                                        ": " + std::strerror(-res)));
    else if (!r.error && p.done < p.need)
      r.error = std::make_exception_ptr(
          Error(ErrorKind::Runtime, r.what + ": short read: " + std::to_string(p.done) + " of " +
                                        std::to_string(p.need) + " bytes at offset " +
                                        std::to_string(p.offset) + " (file truncated?)"));
    else if (!r.error && p.copy_to != nullptr)
      std::memcpy(p.copy_to, p.buf + p.copy_from, p.copy_bytes);
    if (--r.left > 0) return true;
    r.staging.clear();
    r.done(r.error);
    std::lock_guard<std::mutex> lock(mu);
    live.erase(&r);
    return true;
  }

  void reap() {
    for (;;) {
      io_uring_cqe* cqe = nullptr;
      if (io_uring_wait_cqe(&ring, &cqe) < 0) continue;
      auto* p = static_cast<Read::Piece*>(io_uring_cqe_get_data(cqe));
      const int res = cqe->res;
      io_uring_cqe_seen(&ring, cqe);
      if (p == nullptr) return;  // the destructor's no-op
      const bool finished = complete(*p, res);
      std::lock_guard<std::mutex> lock(mu);
      --inflight;
      if (!finished) demand.push_front(p);
      pump();
      if (inflight == 0 && demand.empty() && prefetch.empty()) idle.notify_all();
    }
  }
};

UringReader::UringReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  impl_->reaper = std::thread([this] { impl_->reap(); });
}

std::unique_ptr<UringReader> UringReader::open(bool direct) {
  auto impl = std::make_unique<Impl>();
  const int rc = io_uring_queue_init(kDepth, &impl->ring, 0);
  if (rc < 0) {
    std::fprintf(stderr, "expert reads: io_uring unavailable (%s), reading with pread\n",
                 std::strerror(-rc));
    return nullptr;
  }
  impl->direct = direct;
  return std::unique_ptr<UringReader>(new UringReader(std::move(impl)));
}

UringReader::~UringReader() {
  {
    std::unique_lock<std::mutex> lock(impl_->mu);
    impl_->idle.wait(lock, [this] {
      return impl_->inflight == 0 && impl_->demand.empty() && impl_->prefetch.empty();
    });
    io_uring_sqe* sqe = io_uring_get_sqe(&impl_->ring);
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data(sqe, nullptr);
    io_uring_submit(&impl_->ring);
  }
  impl_->reaper.join();
  io_uring_queue_exit(&impl_->ring);
}

bool UringReader::direct() const {
  return impl_->direct;
}

UringReader::Ticket UringReader::read(std::vector<Range> ranges, bool demand, std::string what,
                                      Done done) {
  auto t = std::make_shared<Read>();
  t->what = std::move(what);
  t->done = std::move(done);
  t->demand = demand;
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (const Range& r : ranges) impl_->add_pieces(*t, r);
  t->left = t->pieces.size();
  if (t->pieces.empty()) {
    t->done(nullptr);
    return t;
  }
  impl_->live.emplace(t.get(), t);
  for (Read::Piece& p : t->pieces) (demand ? impl_->demand : impl_->prefetch).push_back(&p);
  impl_->pump();
  return t;
}

void UringReader::promote(const Ticket& t) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (t->demand) return;
  t->demand = true;
  auto& q = impl_->prefetch;
  for (auto it = q.begin(); it != q.end();) {
    if ((*it)->read == t.get()) {
      impl_->demand.push_back(*it);
      it = q.erase(it);
    } else {
      ++it;
    }
  }
  impl_->pump();
}

double UringReader::measure_direct_rate(const std::string& path, uint64_t bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) return 0;
  const auto size = static_cast<uint64_t>(::lseek(fd, 0, SEEK_END));
  io_uring ring{};
  if (size < kPiece || io_uring_queue_init(kDepth, &ring, 0) < 0) {
    ::close(fd);
    return 0;
  }
  const uint64_t n = std::max<uint64_t>(1, std::min(bytes, size) / kPiece);
  const uint64_t stride = align_down((size - kPiece) / n);
  std::vector<Staging> bufs;
  for (unsigned i = 0; i < kDepth; ++i) bufs.push_back(aligned_buffer(kPiece));
  std::vector<unsigned> free_bufs(kDepth);
  for (unsigned i = 0; i < kDepth; ++i) free_bufs[i] = i;
  uint64_t next = 0, done = 0, got = 0;
  bool failed = false;
  const auto t0 = std::chrono::steady_clock::now();
  while (done < n && !failed) {
    while (next < n && !free_bufs.empty()) {
      const unsigned b = free_bufs.back();
      free_bufs.pop_back();
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      io_uring_prep_read(sqe, fd, bufs[b].get(), kPiece, next * stride);
      io_uring_sqe_set_data64(sqe, b);
      ++next;
    }
    io_uring_submit(&ring);
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring, &cqe) < 0) continue;
    failed = cqe->res < 0;
    got += failed ? 0 : static_cast<uint64_t>(cqe->res);
    free_bufs.push_back(static_cast<unsigned>(io_uring_cqe_get_data64(cqe)));
    io_uring_cqe_seen(&ring, cqe);
    ++done;
  }
  // Reap what is still in flight before the buffers go away.
  for (; done < next; ++done) {
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring, &cqe) == 0) io_uring_cqe_seen(&ring, cqe);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  io_uring_queue_exit(&ring);
  ::close(fd);
  return failed || s <= 0 ? 0 : static_cast<double>(got) / s;
}

#else  // no liburing: every expert read is a pread

class UringReader::Read {};
struct UringReader::Impl {};

UringReader::UringReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UringReader::~UringReader() = default;

std::unique_ptr<UringReader> UringReader::open(bool) {
  std::fprintf(stderr, "expert reads: built without liburing, reading with pread\n");
  return nullptr;
}

bool UringReader::direct() const {
  return false;
}
UringReader::Ticket UringReader::read(std::vector<Range>, bool, std::string, Done) {
  return nullptr;
}
void UringReader::promote(const Ticket&) {}
double UringReader::measure_direct_rate(const std::string&, uint64_t) {
  return 0;
}

#endif

}  // namespace ts
