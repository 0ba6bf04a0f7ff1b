#include "services/coordinator/domain/validation.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace conduit::coordinator {

absl::Status ValidateId(absl::string_view what, absl::string_view id) {
  if (id.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " is empty"));
  if (id.size() > kMaxIdLength) {
    return absl::InvalidArgumentError(absl::StrFormat("%s is %d bytes; the limit is %d",
                                                      std::string(what), id.size(), kMaxIdLength));
  }
  for (unsigned char c : id) {
    if (c < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " '", absl::CHexEscape(id),
                       "' contains a control character"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateHeartbeatSize(size_t subscribed_topics, size_t subscription_bytes,
                                   size_t owned_partitions) {
  if (subscribed_topics > kMaxSubscribedTopics) {
    return absl::InvalidArgumentError(absl::StrCat("subscribed_topics has ", subscribed_topics,
                                                   " topics; the limit is ", kMaxSubscribedTopics));
  }
  if (subscription_bytes > kMaxSubscriptionBytes) {
    return absl::InvalidArgumentError(absl::StrCat("subscribed_topics has ", subscription_bytes,
                                                   " bytes of names; the limit is ",
                                                   kMaxSubscriptionBytes));
  }
  if (owned_partitions > static_cast<size_t>(kMaxPartitionsPerRequest)) {
    return absl::InvalidArgumentError(absl::StrCat("owned_partitions has ", owned_partitions,
                                                   " partitions; the limit is ",
                                                   kMaxPartitionsPerRequest));
  }
  return absl::OkStatus();
}

absl::Status ValidateMemberlessEpoch(MemberEpoch member_epoch) {
  if (member_epoch != kLeavingEpoch && member_epoch != kJoiningEpoch) {
    return absl::InvalidArgumentError(
        absl::StrCat("member_epoch ", member_epoch.value(),
                     " needs a member_id; a commit without members uses epoch -1 or 0"));
  }
  return absl::OkStatus();
}

}  // namespace conduit::coordinator
