#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/ids/strong_id.h"

// Plain values of the etcd client (common/etcd/etcd_client.h): what etcd's KV, Lease and Watch
// services answer, without protobuf types.

namespace conduit::etcd {

// An etcd lease id. LeaseId() (0) is "no lease" wherever a lease is optional. A strong type
// because it is an int64 among revisions and versions, all easy to mix up.
struct LeaseIdTag {};
using LeaseId = ids::StrongId<LeaseIdTag, int64_t>;

// One key as etcd stores it. Revisions are the cluster-wide counter of changes (every Put,
// Delete or successful Txn that changes something raises it by one); version counts the
// key's changes since its creation (0: the key does not exist, as in a Version compare).
struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;  // the revision that created the key (a fencing token)
  int64_t mod_revision = 0;     // the revision of its last change
  int64_t version = 0;
  LeaseId lease;  // the lease the key is attached to; LeaseId() when none
};

// The answer to a Get, a GetPrefix or a Get op in a Txn: the keys found (in key order) and the
// store's revision when it was read (read the same revision again to compare, or watch from
// revision + 1 to see every change after it).
struct RangeResult {
  std::vector<KeyValue> kvs;
  int64_t revision = 0;
};

// The answer to a Delete or DeletePrefix: how many keys went, and the store's revision after.
struct DeleteResult {
  int64_t deleted = 0;
  int64_t revision = 0;
};

// A granted lease. etcd raises a requested TTL below its minimum (about 1.5 × the election
// timeout, rounded up to whole seconds) to that minimum; ttl_seconds is what it granted.
struct Lease {
  LeaseId id;
  int64_t ttl_seconds = 0;
};

// What TimeToLive reports about a live lease.
struct LeaseInfo {
  LeaseId id;
  int64_t ttl_seconds = 0;          // remaining
  int64_t granted_ttl_seconds = 0;  // as granted (or last renewed to)
  std::vector<std::string> keys;    // attached keys, when asked for
};

enum class EventType { kPut, kDelete };

// One change seen by a watch. For a delete, kv holds the key and mod_revision (the delete's
// revision); the other fields are zero.
struct WatchEvent {
  EventType type = EventType::kPut;
  KeyValue kv;
};

}  // namespace conduit::etcd
