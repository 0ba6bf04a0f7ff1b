#include "services/log_broker/domain/not_leader.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace conduit::log_broker {
namespace {

constexpr char kLeaderPayload[] = "type.conduit.dev/conduit.log.v1.LeaderHint";

}  // namespace

absl::Status NotLeaderError(int32_t self, const std::string& topic, int32_t partition,
                            const LeaderHint& leader) {
  absl::Status status = absl::FailedPreconditionError(
      absl::StrFormat("broker %d does not lead %s/%d; its leader is broker %d at %s (epoch %d)",
                      self, topic, partition, leader.id, leader.address, leader.epoch));
  status.SetPayload(kLeaderPayload, absl::Cord(absl::StrFormat("%d\n%s\n%d", leader.id,
                                                               leader.address, leader.epoch)));
  return status;
}

std::optional<LeaderHint> LeaderHintOf(const absl::Status& status) {
  auto payload = status.GetPayload(kLeaderPayload);
  if (!payload) return std::nullopt;
  std::vector<std::string> parts = absl::StrSplit(std::string(*payload), '\n');
  LeaderHint hint;
  int32_t epoch = 0;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &hint.id) ||
      !absl::SimpleAtoi(parts[2], &epoch)) {
    return std::nullopt;
  }
  hint.epoch = LeaderEpoch(epoch);
  hint.address = parts[1];
  return hint;
}

}  // namespace conduit::log_broker
