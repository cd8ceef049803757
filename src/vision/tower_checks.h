// What the vision towers open with: the mmproj GGUF's projector type (the converter's
// clip.vision.projector_type, or the older clip.projector_type), range checks of the shape a
// config gives, and the thread count (errors name the file and the tower).
#pragma once

#include <cstdint>
#include <string>

namespace ts {

class GgufFile;
class ModelSource;

std::string mmproj_projector_type(const GgufFile& g);
// Errors (ErrorKind::Model): the mmproj's projector type is not `want`.
void require_projector(const ModelSource& s, const std::string& want, const std::string& tower);
// Errors (ErrorKind::Model): x outside [lo, hi], naming the file, the tower and `what`.
void check_range(const ModelSource& s, const std::string& tower, const char* what, int64_t x,
                 int64_t lo, int64_t hi);
// `threads`, or every hardware thread where it is not positive.
int tower_threads(int threads);

}  // namespace ts
