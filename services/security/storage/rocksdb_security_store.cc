#include "services/security/storage/rocksdb_security_store.h"

#include <rocksdb/write_batch.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/coding/coding.h"
#include "common/security/acl_file.h"
#include "services/security/storage/records.pb.h"

namespace conduit::security_service {
namespace {

using rocksdb_util::ToStatus;
namespace spb = ::conduit::security::storage;

constexpr char kAclsCf[] = "acls";
constexpr char kAuditCf[] = "audit";

std::string AuditKey(uint64_t id) {
  std::string key;
  coding::PutBigEndian64(&key, id);
  return key;
}

std::string EncodeAudit(const security::AuditRecord& r) {
  spb::Audit pb;
  pb.set_time_micros(absl::ToUnixMicros(r.time));
  pb.set_principal(r.principal);
  pb.set_peer(r.peer);
  pb.set_method(r.method);
  for (const security::AuditCheck& c : r.checks) {
    spb::AuditCheck* out = pb.add_checks();
    out->set_resource_type(static_cast<int32_t>(c.resource_type));
    out->set_resource_name(c.resource_name);
    out->set_operation(static_cast<int32_t>(c.operation));
    out->set_allowed(c.allowed);
    out->set_reason(c.reason);
  }
  pb.set_status_code(r.status_code);
  pb.set_status_message(r.status_message);
  for (const std::string& d : r.details) pb.add_details(d);
  pb.set_denied(r.denied);
  return pb.SerializeAsString();
}

absl::StatusOr<security::AuditRecord> DecodeAudit(uint64_t id, const rocksdb::Slice& value) {
  spb::Audit pb;
  if (!pb.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
    return absl::DataLossError(absl::StrCat("audit record ", id, " does not parse"));
  }
  security::AuditRecord r;
  r.id = id;
  r.time = absl::FromUnixMicros(pb.time_micros());
  r.principal = pb.principal();
  r.peer = pb.peer();
  r.method = pb.method();
  for (const spb::AuditCheck& c : pb.checks()) {
    r.checks.push_back({static_cast<security::ResourceType>(c.resource_type()), c.resource_name(),
                        static_cast<security::Operation>(c.operation()), c.allowed(), c.reason()});
  }
  r.status_code = pb.status_code();
  r.status_message = pb.status_message();
  r.details.assign(pb.details().begin(), pb.details().end());
  r.denied = pb.denied();
  return r;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RocksDbSecurityStore>> RocksDbSecurityStore::Open(
    const std::string& path) {
  auto db = rocksdb_util::Open(path, rocksdb_util::DefaultDbOptions(),
                               rocksdb_util::DefaultCfOptions(), {kAclsCf, kAuditCf});
  if (!db.ok()) return db.status();
  return std::unique_ptr<RocksDbSecurityStore>(new RocksDbSecurityStore(*std::move(db)));
}

RocksDbSecurityStore::RocksDbSecurityStore(rocksdb_util::OpenDb db)
    : db_(std::move(db)), acls_(db_.Find(kAclsCf)), audit_(db_.Find(kAuditCf)) {
  db_.ForgetHandles();
}

absl::StatusOr<std::vector<security::AclEntry>> RocksDbSecurityStore::LoadAcls() {
  std::string text;
  absl::Status s = rocksdb_util::Scan(
      db_.db(), acls_.get(), "",
      [&](std::string_view key, std::string_view) {
        text.append(key.data(), key.size());
        text.push_back('\n');
        return absl::OkStatus();
      },
      "load ACLs");
  if (!s.ok()) return s;
  auto entries = security::ParseAclFile(text);
  if (!entries.ok()) {
    return absl::DataLossError(absl::StrCat("stored ACLs: ", entries.status().message()));
  }
  return entries;
}

absl::Status RocksDbSecurityStore::WriteAcls(const std::vector<security::AclEntry>& add,
                                             const std::vector<security::AclEntry>& remove) {
  rocksdb::WriteBatch batch;
  for (const security::AclEntry& e : add) batch.Put(acls_.get(), security::FormatAclEntry(e), "");
  for (const security::AclEntry& e : remove) batch.Delete(acls_.get(), security::FormatAclEntry(e));
  rocksdb::WriteOptions options;
  options.sync = true;
  return ToStatus(db_.db()->Write(options, &batch), "write ACLs");
}

absl::StatusOr<uint64_t> RocksDbSecurityStore::LastAuditId() {
  std::unique_ptr<rocksdb::Iterator> it(db_.db()->NewIterator({}, audit_.get()));
  it->SeekToLast();
  if (!it->Valid()) {
    if (!it->status().ok()) return ToStatus(it->status(), "read the last audit id");
    return 0;
  }
  if (it->key().size() != 8) return absl::DataLossError("audit key is not 8 bytes");
  return coding::ReadBigEndian64(it->key().data());
}

absl::Status RocksDbSecurityStore::AppendAudit(const std::vector<security::AuditRecord>& records) {
  rocksdb::WriteBatch batch;
  for (const security::AuditRecord& r : records) {
    batch.Put(audit_.get(), AuditKey(r.id), EncodeAudit(r));
  }
  return ToStatus(db_.db()->Write(rocksdb::WriteOptions(), &batch), "append audit records");
}

absl::Status RocksDbSecurityStore::ScanAudit(
    uint64_t after_id, const std::function<bool(const security::AuditRecord&)>& visit) {
  if (after_id == UINT64_MAX) return absl::OkStatus();
  std::unique_ptr<rocksdb::Iterator> it(db_.db()->NewIterator({}, audit_.get()));
  for (it->Seek(AuditKey(after_id + 1)); it->Valid(); it->Next()) {
    if (it->key().size() != 8) return absl::DataLossError("audit key is not 8 bytes");
    auto record = DecodeAudit(coding::ReadBigEndian64(it->key().data()), it->value());
    if (!record.ok()) return record.status();
    if (!visit(*record)) return absl::OkStatus();
  }
  return ToStatus(it->status(), "scan the audit trail");
}

absl::StatusOr<uint64_t> RocksDbSecurityStore::TrimAudit(absl::Time before) {
  // The newest record stays, whatever its age: it is what LastAuditId continues from.
  auto last = LastAuditId();
  if (!last.ok()) return last.status();
  std::unique_ptr<rocksdb::Iterator> it(db_.db()->NewIterator({}, audit_.get()));
  uint64_t removed = 0;
  std::string end;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (it->key().size() != 8 || coding::ReadBigEndian64(it->key().data()) >= *last) break;
    auto record = DecodeAudit(0, it->value());
    if (!record.ok() || record->time >= before) break;
    end = it->key().ToString();
    ++removed;
  }
  if (!it->status().ok()) return ToStatus(it->status(), "scan the audit trail");
  if (removed == 0) return 0;
  // [first, end] inclusive: DeleteRange's end is exclusive, so delete up to end's successor.
  const std::string stop = AuditKey(coding::ReadBigEndian64(end.data()) + 1);
  if (absl::Status s =
          ToStatus(db_.db()->DeleteRange(rocksdb::WriteOptions(), audit_.get(), AuditKey(0), stop),
                   "trim the audit trail");
      !s.ok()) {
    return s;
  }
  return removed;
}

}  // namespace conduit::security_service
