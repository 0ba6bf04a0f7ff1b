#include "services/coordinator/storage/rocksdb_coordinator_store.h"

#include <rocksdb/write_batch.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "services/coordinator/storage/key_schema.h"
#include "services/coordinator/storage/records.pb.h"

namespace conduit::coordinator {
namespace {

using rocksdb_util::ToStatus;
namespace spb = ::conduit::coordinator::storage;

int64_t Micros(absl::Time t) { return absl::ToUnixMicros(t); }
absl::Time FromMicros(int64_t us) { return absl::FromUnixMicros(us); }

void PutPartition(const TopicPartition& tp, GroupEpoch epoch, spb::TopicPartitionRecord* out) {
  out->set_topic(tp.topic);
  out->set_partition(tp.partition);
  out->set_epoch(epoch.value());
}
TopicPartition GetPartition(const spb::TopicPartitionRecord& r) {
  return TopicPartition{r.topic(), r.partition()};
}

std::string EncodeGroup(const GroupRecord& g) {
  spb::Group pb;
  pb.set_epoch(g.epoch.value());
  pb.set_rebalances(g.rebalances);
  pb.set_next_audit_id(g.next_audit_id);
  pb.set_created_micros(Micros(g.created));
  for (const auto& [member, partitions] : g.target) {
    spb::AssignmentEntry* e = pb.add_target();
    e->set_member_id(member);
    for (const TopicPartition& tp : partitions)
      PutPartition(tp, GroupEpoch(0), e->add_partitions());
  }
  for (const auto& [topic, count] : g.partition_counts) {
    (*pb.mutable_partition_counts())[topic] = count;
  }
  return pb.SerializeAsString();
}

std::string EncodeMember(const MemberRecord& m) {
  spb::Member pb;
  pb.set_instance_id(m.instance_id);
  pb.set_client_id(m.client_id);
  pb.set_client_host(m.client_host);
  pb.set_epoch(m.epoch.value());
  for (const std::string& t : m.subscription) pb.add_subscription(t);
  pb.set_session_timeout_micros(absl::ToInt64Microseconds(m.session_timeout));
  for (const auto& [tp, since] : m.owned) PutPartition(tp, since, pb.add_owned());
  for (const TopicPartition& tp : m.revoking) PutPartition(tp, GroupEpoch(0), pb.add_revoking());
  for (const TopicPartition& tp : m.resets) PutPartition(tp, GroupEpoch(0), pb.add_resets());
  pb.set_resets_epoch(m.resets_epoch.value());
  return pb.SerializeAsString();
}

std::string EncodeOffset(const OffsetRecord& o) {
  spb::Offset pb;
  pb.set_offset(o.offset);
  pb.set_metadata(o.metadata);
  pb.set_commit_time_micros(Micros(o.commit_time));
  pb.set_committed_by(o.committed_by);
  pb.set_member_epoch(o.member_epoch.value());
  return pb.SerializeAsString();
}

std::string EncodeAudit(const AuditRecord& a) {
  spb::Audit pb;
  pb.set_time_micros(Micros(a.time));
  pb.set_action(a.action);
  pb.set_actor(a.actor);
  pb.set_peer(a.peer);
  pb.set_reason(a.reason);
  pb.set_spec(a.spec);
  pb.set_topic(a.topic);
  pb.set_group_epoch(a.group_epoch.value());
  for (const PartitionReset& r : a.partitions) {
    spb::PartitionReset* p = pb.add_partitions();
    p->set_partition(r.partition);
    p->set_had_offset(r.had_offset);
    p->set_before(r.before);
    p->set_after(r.after);
    p->set_owner_member_id(r.owner_member_id);
  }
  return pb.SerializeAsString();
}

AuditRecord DecodeAudit(const spb::Audit& pb) {
  AuditRecord a;
  a.time = FromMicros(pb.time_micros());
  a.action = pb.action();
  a.actor = pb.actor();
  a.peer = pb.peer();
  a.reason = pb.reason();
  a.spec = pb.spec();
  a.topic = pb.topic();
  a.group_epoch = GroupEpoch(pb.group_epoch());
  for (const spb::PartitionReset& p : pb.partitions()) {
    a.partitions.push_back(
        {p.partition(), p.had_offset(), p.before(), p.after(), p.owner_member_id()});
  }
  return a;
}

absl::Status Corrupt(const char* what, std::string_view key) {
  return absl::DataLossError(absl::StrCat("cannot decode ", what, " at key '",
                                          absl::CHexEscape(absl::string_view(key.data(), key.size())),
                                          "'"));
}

template <typename Pb>
bool ParseValue(std::string_view value, Pb* pb) {
  return pb->ParseFromArray(value.data(), static_cast<int>(value.size()));
}

// The group stored at `key` (its id); DATA_LOSS when the value does not parse.
absl::StatusOr<GroupRecord> DecodeGroup(std::string_view key, std::string_view value) {
  spb::Group pb;
  if (!ParseValue(value, &pb)) return Corrupt("group", key);
  GroupRecord g;
  g.group_id = std::string(key);
  g.epoch = GroupEpoch(pb.epoch());
  g.rebalances = pb.rebalances();
  g.next_audit_id = pb.next_audit_id();
  g.created = FromMicros(pb.created_micros());
  for (const spb::AssignmentEntry& e : pb.target()) {
    PartitionSet& set = g.target[e.member_id()];
    for (const auto& p : e.partitions()) set.insert(GetPartition(p));
  }
  g.partition_counts.insert(pb.partition_counts().begin(), pb.partition_counts().end());
  return g;
}

// The member stored at `key`; DATA_LOSS when the key or the value does not parse.
absl::StatusOr<MemberRecord> DecodeMember(std::string_view key, std::string_view value) {
  spb::Member pb;
  MemberRecord m;
  const auto parts = keys::ParseMemberKey(key);
  if (!parts || !ParseValue(value, &pb)) return Corrupt("member", key);
  m.group_id = std::string(parts->group);
  m.member_id = std::string(parts->member);
  m.instance_id = pb.instance_id();
  m.client_id = pb.client_id();
  m.client_host = pb.client_host();
  m.epoch = MemberEpoch(pb.epoch());
  m.subscription.assign(pb.subscription().begin(), pb.subscription().end());
  m.session_timeout = absl::Microseconds(pb.session_timeout_micros());
  for (const auto& p : pb.owned()) m.owned[GetPartition(p)] = GroupEpoch(p.epoch());
  for (const auto& p : pb.revoking()) m.revoking.insert(GetPartition(p));
  for (const auto& p : pb.resets()) m.resets.insert(GetPartition(p));
  m.resets_epoch = GroupEpoch(pb.resets_epoch());
  return m;
}

// The committed offset stored at `key`; DATA_LOSS when the key or the value does not parse.
absl::StatusOr<OffsetRecord> DecodeOffset(std::string_view key, std::string_view value) {
  spb::Offset pb;
  OffsetRecord o;
  const auto parts = keys::ParseOffsetKey(key);
  if (!parts || !ParseValue(value, &pb)) return Corrupt("offset", key);
  o.group_id = std::string(parts->group);
  o.tp.topic = std::string(parts->topic);
  o.tp.partition = parts->partition;
  o.offset = pb.offset();
  o.metadata = pb.metadata();
  o.commit_time = FromMicros(pb.commit_time_micros());
  o.committed_by = pb.committed_by();
  o.member_epoch = MemberEpoch(pb.member_epoch());
  return o;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RocksDbCoordinatorStore>> RocksDbCoordinatorStore::Open(
    const std::string& path) {
  std::vector<std::string> cfs(keys::kColumnFamilies.begin(), keys::kColumnFamilies.end());
  auto db = rocksdb_util::Open(path, rocksdb_util::DefaultDbOptions(),
                               rocksdb_util::DefaultCfOptions(), cfs);
  if (!db.ok()) return db.status();
  return std::unique_ptr<RocksDbCoordinatorStore>(
      new RocksDbCoordinatorStore(*std::move(db), path));
}

RocksDbCoordinatorStore::RocksDbCoordinatorStore(rocksdb_util::OpenDb db, const std::string& path)
    : db_(std::move(db)), space_(path) {
  groups_ = db_.Find(keys::kGroupsCf);
  members_ = db_.Find(keys::kMembersCf);
  offsets_ = db_.Find(keys::kOffsetsCf);
  audit_ = db_.Find(keys::kAuditCf);
  db_.ForgetHandles();
}

absl::StatusOr<StoredState> RocksDbCoordinatorStore::Load() {
  StoredState out;
  absl::Status s = rocksdb_util::Scan(
      db_.db(), groups_.get(), "",
      [&](std::string_view key, std::string_view value) {
        auto g = DecodeGroup(key, value);
        if (!g.ok()) return g.status();
        out.groups.push_back(*std::move(g));
        return absl::OkStatus();
      },
      "load groups");
  if (!s.ok()) return s;
  s = rocksdb_util::Scan(
      db_.db(), members_.get(), "",
      [&](std::string_view key, std::string_view value) {
        auto m = DecodeMember(key, value);
        if (!m.ok()) return m.status();
        out.members.push_back(*std::move(m));
        return absl::OkStatus();
      },
      "load members");
  if (!s.ok()) return s;
  s = rocksdb_util::Scan(
      db_.db(), offsets_.get(), "",
      [&](std::string_view key, std::string_view value) {
        auto o = DecodeOffset(key, value);
        if (!o.ok()) return o.status();
        out.offsets.push_back(*std::move(o));
        return absl::OkStatus();
      },
      "load offsets");
  if (!s.ok()) return s;
  return out;
}

absl::Status RocksDbCoordinatorStore::Write(const std::vector<const CoordinatorWrite*>& writes) {
  CONDUIT_RETURN_IF_ERROR(space_.Check());
  rocksdb::WriteBatch batch;
  rocksdb::Status s;
  auto check = [&](const rocksdb::Status& st) {
    if (s.ok()) s = st;
  };
  for (const CoordinatorWrite* w : writes) {
    for (const std::string& group : w->delete_groups) {
      check(batch.Delete(groups_.get(), group));
      for (const auto& cf : {members_, offsets_, audit_}) {
        check(batch.DeleteRange(cf.get(), keys::GroupPrefix(group), keys::GroupPrefixEnd(group)));
      }
    }
    for (const GroupRecord& g : w->put_groups) {
      check(batch.Put(groups_.get(), g.group_id, EncodeGroup(g)));
    }
    for (const auto& [group, member] : w->delete_members) {
      check(batch.Delete(members_.get(), keys::MemberKey(group, member)));
    }
    for (const MemberRecord& m : w->put_members) {
      check(batch.Put(members_.get(), keys::MemberKey(m.group_id, m.member_id), EncodeMember(m)));
    }
    for (const OffsetRecord& o : w->put_offsets) {
      check(batch.Put(offsets_.get(), keys::OffsetKey(o.group_id, o.tp.topic, o.tp.partition),
                      EncodeOffset(o)));
    }
    for (const AuditRecord& a : w->put_audit) {
      check(batch.Put(audit_.get(), keys::AuditKey(a.group_id, a.id), EncodeAudit(a)));
    }
  }
  if (!s.ok()) return ToStatus(s, "build coordinator write batch");
  if (batch.Count() == 0) return absl::OkStatus();
  rocksdb::WriteOptions options;
  options.sync = true;
  return ToStatus(db_.db()->Write(options, &batch), "write coordinator changes");
}

absl::StatusOr<std::vector<AuditRecord>> RocksDbCoordinatorStore::ListAudit(
    const std::string& group_id, uint64_t before_id, int limit) {
  std::vector<AuditRecord> out;
  const std::string prefix = keys::GroupPrefix(group_id);
  std::unique_ptr<rocksdb::Iterator> it(
      db_.db()->NewIterator(rocksdb::ReadOptions(), audit_.get()));
  if (before_id == 0) {
    it->SeekForPrev(keys::GroupPrefixEnd(group_id));
  } else {
    it->SeekForPrev(keys::AuditKey(group_id, before_id - 1));
  }
  for (; it->Valid() && static_cast<int>(out.size()) < limit; it->Prev()) {
    const std::string_view key = it->key().ToStringView();
    if (!key.starts_with(prefix)) break;
    spb::Audit pb;
    const std::optional<uint64_t> id = keys::AuditIdOfKey(group_id, key);
    if (!id || !pb.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
      return Corrupt("audit entry", key);
    }
    AuditRecord a = DecodeAudit(pb);
    a.group_id = group_id;
    a.id = *id;
    out.push_back(std::move(a));
  }
  if (!it->status().ok()) return ToStatus(it->status(), "list group audit");
  return out;
}

}  // namespace conduit::coordinator
