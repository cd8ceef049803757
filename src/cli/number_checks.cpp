#include "cli/number_checks.h"

#include <string>

namespace ts::cli {

CLI::Validator at_least(double least) {
  std::string bound = std::to_string(least);
  bound.erase(bound.find_last_not_of('0') + 1);  // 1.000000 -> 1
  if (bound.back() == '.') bound.pop_back();
  return CLI::Validator(
      [least, bound](std::string& value) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(value, v)) return "'" + value + "' is not a number";
        return v >= least ? std::string() : "must be at least " + bound + ", got " + value;
      },
      ">=" + bound);
}

}  // namespace ts::cli
