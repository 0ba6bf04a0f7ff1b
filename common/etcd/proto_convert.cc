#include "common/etcd/proto_convert.h"

#include <string>

namespace conduit::etcd::internal {
namespace {

etcdserverpb::Compare_CompareResult ToProto(CompareOp op) {
  switch (op) {
    case CompareOp::kEqual:
      return etcdserverpb::Compare::EQUAL;
    case CompareOp::kNotEqual:
      return etcdserverpb::Compare::NOT_EQUAL;
    case CompareOp::kGreater:
      return etcdserverpb::Compare::GREATER;
    case CompareOp::kLess:
      return etcdserverpb::Compare::LESS;
  }
  return etcdserverpb::Compare::EQUAL;
}

void ToProto(const Compare& in, etcdserverpb::Compare* out) {
  out->set_result(ToProto(in.op));
  out->set_key(in.key);
  switch (in.target) {
    case Compare::Target::kVersion:
      out->set_target(etcdserverpb::Compare::VERSION);
      out->set_version(in.number);
      break;
    case Compare::Target::kCreateRevision:
      out->set_target(etcdserverpb::Compare::CREATE);
      out->set_create_revision(in.number);
      break;
    case Compare::Target::kModRevision:
      out->set_target(etcdserverpb::Compare::MOD);
      out->set_mod_revision(in.number);
      break;
    case Compare::Target::kValue:
      out->set_target(etcdserverpb::Compare::VALUE);
      out->set_value(in.value);
      break;
  }
}

void ToProto(const Op& in, etcdserverpb::RequestOp* out) {
  switch (in.kind) {
    case Op::Kind::kPut: {
      etcdserverpb::PutRequest* put = out->mutable_request_put();
      put->set_key(in.key);
      put->set_value(in.value);
      put->set_lease(in.lease.value());
      break;
    }
    case Op::Kind::kDelete: {
      etcdserverpb::DeleteRangeRequest* del = out->mutable_request_delete_range();
      SetRange(in.key, in.prefix, del->mutable_key(), del->mutable_range_end());
      break;
    }
    case Op::Kind::kGet: {
      etcdserverpb::RangeRequest* get = out->mutable_request_range();
      SetRange(in.key, in.prefix, get->mutable_key(), get->mutable_range_end());
      break;
    }
  }
}

}  // namespace

std::string PrefixRangeEnd(absl::string_view prefix) {
  std::string end(prefix);
  for (size_t i = end.size(); i > 0; --i) {
    if (static_cast<unsigned char>(end[i - 1]) < 0xff) {
      end[i - 1] = static_cast<char>(static_cast<unsigned char>(end[i - 1]) + 1);
      end.resize(i);
      return end;
    }
  }
  return std::string(1, '\0');  // only 0xff bytes (or empty): to the end of the key space
}

void SetRange(absl::string_view key, bool prefix, std::string* range_key, std::string* range_end) {
  if (prefix && key.empty()) {
    *range_key = std::string(1, '\0');
    *range_end = std::string(1, '\0');
    return;
  }
  *range_key = std::string(key);
  if (prefix) *range_end = PrefixRangeEnd(key);
}

KeyValue FromProto(const mvccpb::KeyValue& kv) {
  return {kv.key(),          kv.value(),   kv.create_revision(),
          kv.mod_revision(), kv.version(), LeaseId(kv.lease())};
}

RangeResult FromProto(const etcdserverpb::RangeResponse& response) {
  RangeResult result;
  result.revision = response.header().revision();
  result.kvs.reserve(response.kvs_size());
  for (const mvccpb::KeyValue& kv : response.kvs()) result.kvs.push_back(FromProto(kv));
  return result;
}

etcdserverpb::TxnRequest ToProto(const Txn& txn) {
  etcdserverpb::TxnRequest request;
  for (const Compare& compare : txn.compares()) ToProto(compare, request.add_compare());
  for (const Op& op : txn.success()) ToProto(op, request.add_success());
  for (const Op& op : txn.failure()) ToProto(op, request.add_failure());
  return request;
}

TxnResult FromProto(const etcdserverpb::TxnResponse& response) {
  TxnResult result;
  result.succeeded = response.succeeded();
  result.revision = response.header().revision();
  for (const etcdserverpb::ResponseOp& op : response.responses()) {
    OpResult& out = result.responses.emplace_back();
    if (op.has_response_range()) {
      out.kind = Op::Kind::kGet;
      out.range = FromProto(op.response_range());
      // A range inside a Txn carries the revision it read at; fall back to the Txn's.
      if (out.range.revision == 0) out.range.revision = result.revision;
    } else if (op.has_response_delete_range()) {
      out.kind = Op::Kind::kDelete;
      out.deleted = op.response_delete_range().deleted();
    } else {
      out.kind = Op::Kind::kPut;
    }
  }
  return result;
}

}  // namespace conduit::etcd::internal
