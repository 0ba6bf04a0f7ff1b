#pragma once

// Every on-disk key of the coordinator (see services/coordinator/README.md). Each column family
// holds one kind of key. Group ids and topics contain no control characters (validated), so a
// NUL byte ends them and a group is the contiguous range [group NUL, group \x01).

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/coding/coding.h"

namespace conduit::coordinator::keys {

inline constexpr char kGroupsCf[] = "groups";    // group → storage.Group
inline constexpr char kMembersCf[] = "members";  // group NUL member → storage.Member
inline constexpr char kOffsetsCf[] = "offsets";  // group NUL topic NUL BE32(partition) → Offset
inline constexpr char kAuditCf[] = "audit";      // group NUL BE64(id) → storage.Audit
inline constexpr std::array<std::string_view, 4> kColumnFamilies = {kGroupsCf, kMembersCf,
                                                                    kOffsetsCf, kAuditCf};

inline std::string GroupPrefix(std::string_view group) {
  std::string key(group);
  key.push_back('\0');
  return key;
}
// The end of a group's range (exclusive).
inline std::string GroupPrefixEnd(std::string_view group) {
  std::string key(group);
  key.push_back('\x01');
  return key;
}
inline std::string MemberKey(std::string_view group, std::string_view member) {
  return GroupPrefix(group).append(member);
}
inline std::string OffsetKey(std::string_view group, std::string_view topic, int32_t partition) {
  std::string key = GroupPrefix(group).append(topic);
  key.push_back('\0');
  coding::PutBigEndian32(&key, static_cast<uint32_t>(partition));
  return key;
}
inline std::string AuditKey(std::string_view group, uint64_t id) {
  std::string key = GroupPrefix(group);
  coding::PutBigEndian64(&key, id);
  return key;
}

// The parts of a MemberKey, or nullopt for a key of another shape.
struct MemberKeyParts {
  std::string_view group, member;
};
inline std::optional<MemberKeyParts> ParseMemberKey(std::string_view key) {
  const size_t nul = key.find('\0');
  if (nul == std::string_view::npos) return std::nullopt;
  return MemberKeyParts{key.substr(0, nul), key.substr(nul + 1)};
}

// The parts of an OffsetKey, or nullopt for a key of another shape.
struct OffsetKeyParts {
  std::string_view group, topic;
  int32_t partition = 0;
};
inline std::optional<OffsetKeyParts> ParseOffsetKey(std::string_view key) {
  const size_t first = key.find('\0');
  if (first == std::string_view::npos) return std::nullopt;
  const std::string_view rest = key.substr(first + 1);
  const size_t second = rest.find('\0');
  if (second == std::string_view::npos || rest.size() != second + 1 + 4) return std::nullopt;
  return OffsetKeyParts{key.substr(0, first), rest.substr(0, second),
                        static_cast<int32_t>(coding::ReadBigEndian32(rest.data() + second + 1))};
}

// The id of an AuditKey of `group`, or nullopt for a key of another shape.
inline std::optional<uint64_t> AuditIdOfKey(std::string_view group, std::string_view key) {
  const std::string prefix = GroupPrefix(group);
  if (key.size() != prefix.size() + 8 || !key.starts_with(prefix)) return std::nullopt;
  return coding::ReadBigEndian64(key.data() + prefix.size());
}

}  // namespace conduit::coordinator::keys
