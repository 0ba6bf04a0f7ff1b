#include "services/log_broker/cluster/metadata_codec.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/grpc/proto_time.h"
#include "conduit/cluster/v1/metadata.pb.h"
#include "services/log_broker/convert/topic_convert.h"

namespace conduit::log_broker::cluster {
namespace {

namespace cpb = ::conduit::cluster::v1;

std::string ToJson(const google::protobuf::Message& message) {
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(message, &out);
  return out;
}

template <typename Message>
absl::StatusOr<Message> FromJson(const std::string& json, const char* what) {
  Message message;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // a newer version's fields
  if (!google::protobuf::util::JsonStringToMessage(json, &message, options).ok()) {
    return absl::DataLossError(absl::StrCat("cluster metadata: bad ", what, ": ", json));
  }
  return message;
}

}  // namespace

std::string EncodeBroker(const BrokerRegistration& broker, etcd::LeaseId lease) {
  cpb::BrokerRecord r;
  r.set_id(broker.id);
  r.set_address(broker.address);
  r.set_incarnation(broker.incarnation);
  r.set_lease_id(lease.value());
  return ToJson(r);
}

absl::StatusOr<BrokerRegistration> DecodeBroker(const std::string& json, etcd::LeaseId* lease) {
  auto r = FromJson<cpb::BrokerRecord>(json, "broker");
  if (!r.ok()) return r.status();
  if (lease != nullptr) *lease = etcd::LeaseId(r->lease_id());
  return BrokerRegistration{r->id(), r->address(), r->incarnation()};
}

std::string EncodeController(int32_t broker_id, const std::string& incarnation) {
  cpb::ControllerRecord r;
  r.set_broker_id(broker_id);
  r.set_incarnation(incarnation);
  return ToJson(r);
}

absl::StatusOr<int32_t> DecodeController(const std::string& json) {
  auto r = FromJson<cpb::ControllerRecord>(json, "controller");
  if (!r.ok()) return r.status();
  return r->broker_id();
}

std::string EncodeTopic(const TopicMeta& meta, int32_t replication_factor) {
  cpb::TopicRecord r;
  r.set_topic_id(meta.id.value());
  convert::ToProto(meta, r.mutable_info());
  r.mutable_info()->set_replication_factor(replication_factor);
  return ToJson(r);
}

absl::StatusOr<TopicAssignment> DecodeTopic(const std::string& json) {
  auto r = FromJson<cpb::TopicRecord>(json, "topic");
  if (!r.ok()) return r.status();
  auto patch = convert::FromProto(r->info().config());
  if (!patch.ok()) return patch.status();
  TopicAssignment t;
  t.meta = TopicMeta{TopicId(r->topic_id()), r->info().name(), r->info().partitions(),
                     patch->ApplyTo(TopicConfig{}), grpc_util::FromTimestamp(r->info().created())};
  t.replication_factor = std::max(1, r->info().replication_factor());
  t.partitions.resize(std::max(0, t.meta.partitions));
  t.partition_revisions.resize(t.partitions.size(), 0);
  return t;
}

std::string EncodePartition(const PartitionAssignment& p) {
  cpb::PartitionRecord r;
  r.set_leader(p.leader);
  r.set_leader_epoch(p.leader_epoch.value());
  for (int32_t b : p.replicas) r.add_replicas(b);
  for (int32_t b : p.isr) r.add_isr(b);
  for (int32_t b : p.target_replicas) r.add_target_replicas(b);
  r.set_throttle_bytes_per_second(p.throttle_bytes_per_second);
  return ToJson(r);
}

absl::StatusOr<PartitionAssignment> DecodePartition(const std::string& json) {
  auto r = FromJson<cpb::PartitionRecord>(json, "partition");
  if (!r.ok()) return r.status();
  return PartitionAssignment{r->leader(),
                             LeaderEpoch(r->leader_epoch()),
                             {r->replicas().begin(), r->replicas().end()},
                             {r->isr().begin(), r->isr().end()},
                             {r->target_replicas().begin(), r->target_replicas().end()},
                             r->throttle_bytes_per_second()};
}

std::string EncodeProducer(const ProducerInfo& producer) {
  cpb::ProducerRecord r;
  r.set_id(producer.id.value());
  r.set_epoch(producer.epoch);
  return ToJson(r);
}

absl::StatusOr<ProducerInfo> DecodeProducer(const std::string& name, const std::string& json) {
  auto r = FromJson<cpb::ProducerRecord>(json, "producer");
  if (!r.ok()) return r.status();
  return ProducerInfo{ProducerId(r->id()), r->epoch(), name};
}

std::string EncodeIdBlock(uint64_t next) {
  cpb::IdBlockRecord r;
  r.set_next(next);
  return ToJson(r);
}

absl::StatusOr<uint64_t> DecodeIdBlock(const std::string& json) {
  auto r = FromJson<cpb::IdBlockRecord>(json, "id block");
  if (!r.ok()) return r.status();
  return r->next();
}

ClusterView BuildView(const MetadataKeys& keys, const Mirror& mirror, int64_t revision,
                      int* skipped) {
  ClusterView view;
  view.revision = revision;
  int bad = 0;
  const std::string& prefix = keys.prefix();
  // partitions/<topic id>/<p> → (id, p, kv), matched to topics once all are read.
  std::map<std::pair<uint64_t, int32_t>, const etcd::KeyValue*> partitions;
  for (const auto& [key, kv] : mirror) {
    if (!absl::StartsWith(key, prefix)) continue;
    const std::string rest = key.substr(prefix.size());
    if (absl::StartsWith(rest, "brokers/")) {
      auto b = DecodeBroker(kv.value);
      b.ok() ? (void)(view.brokers[b->id] = *b) : (void)++bad;
    } else if (absl::StartsWith(rest, "controller/")) {
      auto id = DecodeController(kv.value);
      if (!id.ok()) {
        ++bad;
      } else if (view.controller_epoch == 0 || kv.create_revision < view.controller_epoch) {
        view.controller = *id;
        view.controller_epoch = kv.create_revision;
      }
    } else if (absl::StartsWith(rest, "topics/")) {
      auto t = DecodeTopic(kv.value);
      t.ok() ? (void)(view.topics[t->meta.name] = *std::move(t)) : (void)++bad;
    } else if (absl::StartsWith(rest, "partitions/")) {
      std::vector<std::string> parts = absl::StrSplit(rest, '/');
      uint64_t id = 0;
      int32_t p = 0;
      if (parts.size() == 3 && absl::SimpleAtoi(parts[1], &id) && absl::SimpleAtoi(parts[2], &p)) {
        partitions[{id, p}] = &kv;
      } else {
        ++bad;
      }
    }
  }
  for (auto& [name, t] : view.topics) {
    for (int32_t p = 0; p < static_cast<int32_t>(t.partitions.size()); ++p) {
      auto it = partitions.find({t.meta.id.value(), p});
      if (it == partitions.end()) continue;
      auto state = DecodePartition(it->second->value);
      if (!state.ok()) {
        ++bad;
        continue;
      }
      t.partitions[p] = *state;
      t.partition_revisions[p] = it->second->mod_revision;
    }
  }
  if (skipped != nullptr) *skipped = bad;
  return view;
}

}  // namespace conduit::log_broker::cluster
