#include "common/time/clock.h"

namespace conduit::time {

SystemClock* SystemClock::Get() {
  static SystemClock clock;
  return &clock;
}

}  // namespace conduit::time
