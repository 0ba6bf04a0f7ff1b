#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/etcd/types.h"

// An etcd transaction as plain C++: If(compares...) Then(ops...) Else(ops...), committed with
// Client::Commit (common/etcd/etcd_client.h). etcd applies it atomically at one revision: when
// every compare holds the Then ops run, otherwise the Else ops.
//
//   Txn txn;
//   txn.If(Compare::Version(key, CompareOp::kEqual, 0))
//       .Then(Op::Put(key, value, lease))
//       .Else(Op::Get(key));
//   absl::StatusOr<TxnResult> result = client.Commit(txn);
//
// etcd refuses a Txn of more than 128 ops (--max-txn-ops) and one that changes a key twice
// (both INVALID_ARGUMENT).

namespace conduit::etcd {

enum class CompareOp { kEqual, kNotEqual, kGreater, kLess };

// One condition on one key. For a key that does not exist, Version, CreateRevision and
// ModRevision are 0 and Value compares as absent (so Value(k, kEqual, "") is false for a
// missing key).
struct Compare {
  enum class Target { kVersion, kCreateRevision, kModRevision, kValue };

  static Compare Version(std::string key, CompareOp op, int64_t version) {
    return {Target::kVersion, op, std::move(key), version, {}};
  }
  static Compare CreateRevision(std::string key, CompareOp op, int64_t revision) {
    return {Target::kCreateRevision, op, std::move(key), revision, {}};
  }
  static Compare ModRevision(std::string key, CompareOp op, int64_t revision) {
    return {Target::kModRevision, op, std::move(key), revision, {}};
  }
  static Compare Value(std::string key, CompareOp op, std::string value) {
    return {Target::kValue, op, std::move(key), 0, std::move(value)};
  }

  Target target = Target::kVersion;
  CompareOp op = CompareOp::kEqual;
  std::string key;
  int64_t number = 0;  // Version, CreateRevision, ModRevision
  std::string value;   // Value
};

// One operation of a Txn branch.
struct Op {
  enum class Kind { kPut, kDelete, kGet };

  static Op Put(std::string key, std::string value, LeaseId lease = LeaseId()) {
    return {Kind::kPut, std::move(key), std::move(value), lease, false};
  }
  static Op Delete(std::string key) { return {Kind::kDelete, std::move(key), {}, {}, false}; }
  static Op DeletePrefix(std::string prefix) {
    return {Kind::kDelete, std::move(prefix), {}, {}, true};
  }
  static Op Get(std::string key) { return {Kind::kGet, std::move(key), {}, {}, false}; }
  static Op GetPrefix(std::string prefix) { return {Kind::kGet, std::move(prefix), {}, {}, true}; }

  Kind kind = Kind::kGet;
  std::string key;  // the key, or the prefix when `prefix`
  std::string value;
  LeaseId lease;
  bool prefix = false;
};

// A transaction under construction; a value type, cheap to build and reuse.
class Txn {
 public:
  Txn& If(Compare compare) {
    compares_.push_back(std::move(compare));
    return *this;
  }
  Txn& Then(Op op) {
    success_.push_back(std::move(op));
    return *this;
  }
  Txn& Else(Op op) {
    failure_.push_back(std::move(op));
    return *this;
  }

  const std::vector<Compare>& compares() const { return compares_; }
  const std::vector<Op>& success() const { return success_; }
  const std::vector<Op>& failure() const { return failure_; }

 private:
  std::vector<Compare> compares_;
  std::vector<Op> success_;
  std::vector<Op> failure_;
};

// The answer of one op of the branch that ran, in the order of the ops.
struct OpResult {
  Op::Kind kind = Op::Kind::kGet;
  RangeResult range;    // kGet: the keys read, and the revision they were read at
  int64_t deleted = 0;  // kDelete: how many keys went
};

struct TxnResult {
  bool succeeded = false;  // whether every compare held (so the Then branch ran)
  int64_t revision = 0;    // the store's revision after the Txn (unchanged if it changed nothing)
  std::vector<OpResult> responses;  // of the branch that ran
};

}  // namespace conduit::etcd
