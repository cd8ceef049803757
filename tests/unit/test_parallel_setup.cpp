// What a parallel run needs before it starts: the flags' check against the build and machine
// (refused, saying what is needed and what there is), the --dist-init rendezvous (ranks as threads
// on this host), and the NCCL plugin where the build has one (its version; no communicator on a
// machine without GPUs).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "core/error.h"
#include "parallel/nccl.h"
#include "parallel/parallel_request.h"
#include "parallel/rendezvous.h"
#include "parallel_cases.h"
#include "test_paths.h"

namespace ts {
namespace {

using test::expect_error;

ParallelRequest request(int tensor, int expert, const std::string& dist_init = "") {
  ParallelRequest r;
  r.tensor = tensor;
  r.expert = expert;
  r.dist_init = dist_init;
  return r;
}

ParallelHost host(const std::string& backend, int gpus, int nccl, const std::string& why = "") {
  ParallelHost h;
  h.backend = backend;
  h.gpus = gpus;
  h.gpus_why = gpus == 0 ? why : "";
  h.nccl_version = nccl;
  h.nccl_why = nccl == 0 ? why : "";
  return h;
}

TEST(ParallelRequest, RefusesWhatTheMachineCannotServe) {
  const ParallelHost none = host("auto", 0, 0, "no plugin"), one = host("cuda", 1, 22809),
                     four_no_nccl = host("cuda", 4, 0, "not built"), four = host("cuda", 4, 22809);
  check_parallel_request(request(1, 1), none);  // no parallelism: nothing to check
  expect_error(
      [&] { check_parallel_request(request(2, 1), none); }, ErrorKind::Usage,
      "--tensor-parallel 2 needs 2 GPUs; this machine has 0 (the CUDA backend: no plugin)");
  expect_error([&] { check_parallel_request(request(1, 2), one); }, ErrorKind::Usage,
               "--expert-parallel 2 needs 2 GPUs; this machine has 1");
  expect_error([&] { check_parallel_request(request(2, 1), host("cpu", 0, 0)); }, ErrorKind::Usage,
               "--tensor-parallel 2 needs 2 GPUs; this run is on the CPU");
  expect_error([&] { check_parallel_request(request(4, 4), four_no_nccl); }, ErrorKind::Usage,
               "--tensor-parallel 4 with --expert-parallel 4 needs 4 GPUs; this build has no NCCL "
               "communicator (not built)");
  expect_error([&] { check_parallel_request(request(2, 4), four); }, ErrorKind::Usage,
               "--tensor-parallel 2 and --expert-parallel 4 must name the same GPUs");
  expect_error([&] { check_parallel_request(request(2, 1), four); }, ErrorKind::Unsupported,
               "the engine does not run parallel layers yet");
  expect_error([&] { check_parallel_request(request(1, 1, "node0:29500"), four); },
               ErrorKind::Usage, "--dist-init needs --tensor-parallel or --expert-parallel");
  expect_error([&] { check_parallel_request(request(2, 1, "node0"), four); }, ErrorKind::Usage,
               "--dist-init: expected HOST:PORT");
}

TEST(ParallelRequest, CliRefusesOnThisMachine) {
  std::string out;
  const int status = test::run_command(
      test::binary_path() + " run -n 1 -p hi --backend cpu --tensor-parallel 2", &out);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("--tensor-parallel 2 needs 2 GPUs; this run is on the CPU"), std::string::npos)
      << out;
}

TEST(DistInit, ParsesHostAndPort) {
  const DistInit d = parse_dist_init("node0.cluster:29500");
  EXPECT_EQ(d.host, "node0.cluster");
  EXPECT_EQ(d.port, 29500);
  EXPECT_EQ(parse_dist_init("[::1]:80").host, "::1");
  for (const char* bad : {"node0", ":29500", "node0:", "node0:0", "node0:65536", "node0:2x"})
    expect_error([&] { parse_dist_init(bad); }, ErrorKind::Usage,
                 std::string("--dist-init: expected HOST:PORT (port 1-65535), got '") + bad + "'");
}

int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(s);
  return ntohs(a.sin_port);
}

TEST(DistInit, EveryRankGetsRankZerosBytes) {
  DistInit at;
  at.host = "127.0.0.1";
  at.port = free_port();
  const int N = 4;
  const std::vector<char> id{'n', 'c', 'c', 'l', '\0', 'x'};
  std::vector<std::vector<char>> got(N);
  std::vector<std::thread> ranks;
  // The other ranks start first: they retry until rank 0 listens.
  for (int r = N - 1; r >= 0; --r)
    ranks.emplace_back([&, r] {
      got[static_cast<size_t>(r)] =
          rendezvous_broadcast(at, r, N, r == 0 ? id : std::vector<char>{}, 10000);
    });
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < N; ++r) EXPECT_EQ(got[static_cast<size_t>(r)], id) << "rank " << r;
}

TEST(DistInit, AMissingRankTimesOutNamingTheCount) {
  DistInit at;
  at.host = "127.0.0.1";
  at.port = free_port();
  std::thread one([&] {
    try {
      rendezvous_broadcast(at, 1, 3, {}, 3000);
    } catch (const Error&) {
      // rank 0 gives up first and closes: this rank's error is rank 0's echo
    }
  });
  expect_error([&] { rendezvous_broadcast(at, 0, 3, {'x'}, 500); }, ErrorKind::Runtime,
               "2 of 3 ranks joined before the time ran out");
  one.join();
  expect_error([&] { rendezvous_broadcast(at, 2, 3, {}, 300); }, ErrorKind::Runtime,
               "rank 2 could not reach rank 0 before the time ran out");
}

TEST(Nccl, PluginLoadsWhereBuiltAndNeedsAGpu) {
  std::string why;
  const int version = nccl_version(&why);
  if (version == 0) {
    EXPECT_FALSE(why.empty());
    expect_error([] { nccl_unique_id(); }, ErrorKind::Usage, "NCCL is not available");
    GTEST_SKIP() << "this build has no NCCL communicator: " << why;
  }
  EXPECT_GE(version, 20000);  // NCCL 2.x
  if (test::cuda_device_present())
    GTEST_SKIP() << "a GPU is present: the cuda-multi tests cover it";
  expect_error([] { make_nccl_communicator(0, 2, NcclId{}, 0, nullptr); }, ErrorKind::Usage,
               "NCCL: no CUDA device is present");
}

}  // namespace
}  // namespace ts
