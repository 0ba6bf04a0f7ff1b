#pragma once

#include <cstdint>

#include "common/ids/strong_id.h"

namespace conduit::log_broker {

// A topic's id (from an IdAllocator): never held by two live topics at once; names its column
// family and its keys. Apart from
// producer ids and offsets, which are integers too.
struct TopicIdTag {};
using TopicId = ids::StrongId<TopicIdTag, uint64_t>;

// A partition's leader epoch: raised by every change of its leader (offline included), stamped
// on every record appended under it, never going back along the log. -1 where there is none (the
// last epoch of an empty log).
struct LeaderEpochTag {};
using LeaderEpoch = ids::StrongId<LeaderEpochTag, int32_t>;
inline constexpr LeaderEpoch kNoLeaderEpoch{-1};
// The epoch after `epoch` (a change of leader; the first epoch a truncation removes).
inline LeaderEpoch NextEpoch(LeaderEpoch epoch) { return LeaderEpoch(epoch.value() + 1); }

// An idempotent producer's id (InitProducer).
struct ProducerIdTag {};
using ProducerId = ids::StrongId<ProducerIdTag, int64_t>;

}  // namespace conduit::log_broker
