// Shared by the parallelism tests: an error check, and one round of collectives whose result any
// communicator must give.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "parallel/communicator.h"

namespace ts::test {

// f() throws an Error of `kind` whose message contains `what`.
template <typename F>
void expect_error(F&& f, ErrorKind kind, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing \"" << what << "\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

// On rank r: all-reduce of {r + 1, 10 r, 0.5}, then an exchange of r + 1 rows (r, i) to every peer;
// returns the sums then the rows received. Buffers in `device` memory (host memory when null).
std::vector<float> collectives_round(Communicator& c, Backend* device);

}  // namespace ts::test
