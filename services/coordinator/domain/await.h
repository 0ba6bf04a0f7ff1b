#pragma once

#include <optional>
#include <utility>

#include "absl/synchronization/notification.h"

namespace conduit::coordinator {

// The blocking form of a callback call: runs `start(done)` and waits until `done(result)`.
template <typename Result, typename Start>
Result Await(Start start) {
  absl::Notification finished;
  std::optional<Result> result;
  start([&](Result r) {
    result.emplace(std::move(r));
    finished.Notify();
  });
  finished.WaitForNotification();
  return *std::move(result);
}

}  // namespace conduit::coordinator
