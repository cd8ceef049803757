// What bench says about streamed experts beyond the table: the disk's O_DIRECT read rate measured
// in the same run, the decode's average file read rate (t/s x bytes per token) as a fraction of
// it, and how often the next layers' routers guessed a decode step's experts, per layer.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "runtime/engine.h"

namespace ts::cli {

// bytes/s; 0 unless the experts stream on the host from a file that takes O_DIRECT.
double measure_disk_rate(Engine& engine);
// The read-rate fields of one test.
nlohmann::json read_rate_json(double disk_bps, double ts, double bytes_per_token);
// Per MoE layer, the lookahead hit rates of the last timed run (null where nothing was guessed).
nlohmann::json lookahead_json(Engine& engine);
// Lines under the table: the test's read rate against the disk's and the lookahead hit rates.
void print_streaming_notes(Engine& engine, double disk_bps, const std::string& test, double ts,
                           double bytes_per_token);

}  // namespace ts::cli
