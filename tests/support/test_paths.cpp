#include "test_paths.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <sstream>

#ifdef TURBOSPARK_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace ts::test {

std::string fixtures_dir() {
  return TS_FIXTURES_DIR;
}
std::string repo_dir() {
  return TS_REPO_DIR;
}
std::string binary_path() {
  return TS_BINARY_PATH;
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool cuda_device_present() {
#ifdef TURBOSPARK_HAVE_CUDA
  return cuda_device_available();
#else
  return false;
#endif
}

std::string shared_dir() {
  return file_exists(TS_SHARED_DIR) ? TS_SHARED_DIR : "";
}

std::string shared_path(const std::string& relative) {
  const std::string dir = shared_dir();
  if (dir.empty()) return "";
  const std::string p = dir + "/" + relative;
  return file_exists(p) ? p : "";
}

std::string scratch_path(const std::string& name) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  // Outside a test body (a static initialiser), the process id keeps the path private.
  std::string owner = test != nullptr ? std::string(test->test_suite_name()) + "." + test->name()
                                      : "pid" + std::to_string(::getpid());
  std::replace(owner.begin(), owner.end(), '/', '_');  // parameterised tests: "All/Suite.Case/0"
  return ::testing::TempDir() + "/ts-" + owner + "-" + name;
}

int run_command(const std::string& command, std::string* output) {
  FILE* pipe = ::popen(("( " + command + " ) 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0)
    if (output != nullptr) output->append(buf.data(), n);
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string real_model_path(const std::string& name) {
  std::string out;
  if (run_command("python3 " + repo_dir() + "/tests/tools/find_real_models.py", &out) != 0)
    return "";
  std::istringstream lines(out);
  std::string n, p;
  while (lines >> n >> p)
    if (n == name) return p;
  return "";
}

}  // namespace ts::test
