#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "common/etcd/txn.h"
#include "common/etcd/types.h"
#include "etcd/etcdserver/etcdserverpb/rpc.pb.h"

// Internal to common/etcd: between the client's plain structs and etcd's protobuf messages.

namespace conduit::etcd::internal {

// The range end that makes [key, end) every key starting with `prefix`: the prefix with its last
// byte below 0xff raised by one (and what follows dropped), as etcd's clientv3 WithPrefix.
std::string PrefixRangeEnd(absl::string_view prefix);

// Sets `*key` and `*range_end` for one key or, when `prefix`, every key under `key`; an empty
// prefix is every key ("\0" to "\0", etcd's spelling of "from the first key to the end").
void SetRange(absl::string_view key, bool prefix, std::string* range_key, std::string* range_end);

KeyValue FromProto(const mvccpb::KeyValue& kv);
RangeResult FromProto(const etcdserverpb::RangeResponse& response);

etcdserverpb::TxnRequest ToProto(const Txn& txn);
TxnResult FromProto(const etcdserverpb::TxnResponse& response);

}  // namespace conduit::etcd::internal
