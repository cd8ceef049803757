#include "core/error.h"

namespace ts {

int exit_code_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Usage:
    case ErrorKind::Input:
      return 1;
    case ErrorKind::Model:
    case ErrorKind::Unsupported:
    case ErrorKind::Budget:
      return 2;
    case ErrorKind::Runtime:
      return 3;
  }
  return 3;
}

}  // namespace ts
