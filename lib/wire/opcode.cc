// SPDX-License-Identifier: BSD-3-Clause
#include "wire/opcode.h"

namespace uroce::wire {

const char *transport_name(Transport t) noexcept {
  switch (t) {
    case Transport::kRc:
      return "RC";
    case Transport::kUc:
      return "UC";
    case Transport::kRd:
      return "RD";
    case Transport::kUd:
      return "UD";
    case Transport::kCnp:
      return "CNP";
    case Transport::kNone:
      return "none";
  }
  return "?";
}

}  // namespace uroce::wire
