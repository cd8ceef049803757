#include "cli/number_checks.h"

#include <string>

namespace ts::cli {

CLI::Validator at_least(int64_t least) {
  const std::string bound = std::to_string(least);
  return CLI::Validator(
      [least, bound](std::string& value) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(value, v)) return "'" + value + "' is not a number";
        return v >= static_cast<double>(least) ? std::string()
                                               : "must be at least " + bound + ", got " + value;
      },
      ">=" + bound);
}

}  // namespace ts::cli
