#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "services/log_broker/domain/cluster_view.h"

namespace conduit::log_broker {

// Where a partition is led, carried by the FAILED_PRECONDITION a broker answers for a partition
// it does not lead. The API layer turns it into the trailing metadata documented in log.proto
// (conduit-leader-id, conduit-leader-address, conduit-leader-epoch).
struct LeaderHint {
  int32_t id = kNoBroker;
  std::string address;
  LeaderEpoch epoch;
  friend bool operator==(const LeaderHint&, const LeaderHint&) = default;
};

// FAILED_PRECONDITION "broker S does not lead T/P; its leader is broker L at host:port (epoch
// E)", with the hint as a payload.
absl::Status NotLeaderError(int32_t self, const std::string& topic, int32_t partition,
                            const LeaderHint& leader);
// The hint of a NotLeaderError; nullopt for any other status.
std::optional<LeaderHint> LeaderHintOf(const absl::Status& status);

}  // namespace conduit::log_broker
