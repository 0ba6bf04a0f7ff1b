#pragma once

// Bridges (services/work_queue/README.md, "Bridges"): the rules that turn a log record into a
// job, and the persistence of bridge specs. No I/O here; the runner in bridge/ reads the log.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/work_queue/domain/work_queue.h"

namespace conduit::work_queue {

inline constexpr size_t kMaxBridgeNameBytes = 128;

struct BridgeSpec {
  std::string name;
  uint64_t id = 0;  // random, chosen at creation: the idempotency keys' namespace
  std::string topic;
  std::string group;  // default "bridge.<name>"
  std::string queue;
  // Filter: both parts must pass when set.
  std::string key_prefix;
  std::string header;  // with header_value: the record must carry this header with that value
  std::string header_value;
  std::string tenant_header;
  std::string priority_header;
  absl::Time created = absl::UnixEpoch();
  bool paused = false;
  friend bool operator==(const BridgeSpec&, const BridgeSpec&) = default;
};

// INVALID_ARGUMENT naming the field: a name of 1..128 bytes of [A-Za-z0-9._-]; topic, queue
// present; a header value only with a header name. Fills the default group.
absl::Status ValidateBridgeSpec(BridgeSpec* spec);

// A log record as the bridge sees it.
struct BridgedRecord {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string event_id;
};

// Whether the record passes the bridge's filter.
bool BridgeAccepts(const BridgeSpec& spec, const BridgedRecord& record);

// The job the record becomes: payload = value; the record's headers plus conduit-source-topic,
// -partition, -offset and conduit-event-id (when set); source = (topic, partition, offset);
// tenant and priority from the named headers (kept default when unusable); the idempotency key
// "bridge/<id>/<partition>/<offset>".
NewJob BridgeJob(const BridgeSpec& spec, BridgedRecord record);

// Persistence of bridge specs; each call is durable when it returns. Thread-safe.
class BridgeStore {
 public:
  virtual ~BridgeStore() = default;
  virtual absl::StatusOr<std::vector<BridgeSpec>> LoadBridges() = 0;
  virtual absl::Status PutBridge(const BridgeSpec& spec) = 0;
  virtual absl::Status DeleteBridge(const std::string& name) = 0;
};

}  // namespace conduit::work_queue
