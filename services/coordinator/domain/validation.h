#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "services/coordinator/domain/types.h"

namespace conduit::coordinator {

inline constexpr size_t kMaxIdLength = 255;
inline constexpr size_t kMaxMetadataBytes = 4096;
inline constexpr int32_t kMaxPartitionsPerRequest = 100000;
// What one member may subscribe to. Every subscribed topic costs the coordinator a broker
// question per refresh and a place in its topic cache, so one request must not name 100,000.
inline constexpr size_t kMaxSubscribedTopics = 1000;
inline constexpr size_t kMaxSubscriptionBytes = 64 << 10;

// Group ids, member ids, instance ids and topics: 1..255 bytes, no control characters (NUL
// separates key parts on disk). `what` names the field in the message.
absl::Status ValidateId(absl::string_view what, absl::string_view id);

// The sizes of a heartbeat: at most kMaxSubscribedTopics topics of kMaxSubscriptionBytes in all,
// and kMaxPartitionsPerRequest owned partitions. Checked before a request is converted, so an
// oversized one costs neither a sort nor a set. INVALID_ARGUMENT names the limit.
absl::Status ValidateHeartbeatSize(size_t subscribed_topics, size_t subscription_bytes,
                                   size_t owned_partitions);

// The member epoch of a commit without a member id: -1 or 0 (CommitOffsetsRequest).
absl::Status ValidateMemberlessEpoch(MemberEpoch member_epoch);

}  // namespace conduit::coordinator
