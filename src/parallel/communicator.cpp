#include "parallel/communicator.h"

#include "core/error.h"

namespace ts {

void check_row_exchange(const RowExchange& x, int ranks) {
  const auto n = static_cast<size_t>(ranks);
  const auto check = [&](const std::vector<int64_t>& v, const char* field) {
    if (v.size() != n)
      fail(ErrorKind::Runtime, std::string("internal: RowExchange::") + field + " has " +
                                   std::to_string(v.size()) + " entries for " +
                                   std::to_string(ranks) + " ranks");
    for (int64_t r : v)
      if (r < 0) fail(ErrorKind::Runtime, std::string("internal: RowExchange::") + field + " < 0");
  };
  check(x.send_row0, "send_row0");
  check(x.send_rows, "send_rows");
  check(x.recv_row0, "recv_row0");
  check(x.recv_rows, "recv_rows");
}

}  // namespace ts
