#include "services/log_broker/replication/replica_convert.h"

#include <utility>

namespace conduit::log_broker::replication {

std::vector<ReplicaFetchItem> FromProto(const pb::ReplicaFetchRequest& request) {
  std::vector<ReplicaFetchItem> out;
  out.reserve(request.partitions_size());
  for (const auto& p : request.partitions()) {
    out.push_back(ReplicaFetchItem{p.topic(), TopicId(p.topic_id()), p.partition(),
                                   p.fetch_offset(), LeaderEpoch(p.last_fetched_epoch()),
                                   LeaderEpoch(p.current_leader_epoch())});
  }
  return out;
}

void ToProto(const std::vector<ReplicaFetchItem>& items, pb::ReplicaFetchRequest* out) {
  for (const ReplicaFetchItem& item : items) {
    auto* p = out->add_partitions();
    p->set_topic(item.topic);
    p->set_topic_id(item.topic_id.value());
    p->set_partition(item.partition);
    p->set_fetch_offset(item.fetch_offset);
    p->set_last_fetched_epoch(item.last_fetched_epoch.value());
    p->set_current_leader_epoch(item.current_leader_epoch.value());
  }
}

void ToProto(std::vector<ReplicaFetchData>&& data, pb::ReplicaFetchResponse* out) {
  for (ReplicaFetchData& d : data) {
    auto* p = out->add_partitions();
    p->set_topic(d.topic);
    p->set_topic_id(d.topic_id.value());
    p->set_partition(d.partition);
    p->set_error_code(static_cast<int32_t>(d.status.code()));
    p->set_error_message(std::string(d.status.message()));
    if (d.truncate_to) p->set_truncate_to(*d.truncate_to);
    p->set_high_watermark(d.high_watermark);
    p->set_log_start_offset(d.log_start_offset);
    p->set_log_end_offset(d.log_end_offset);
    *p->mutable_stored_records() = std::move(d.encoded.bytes);
    for (const StoredRecord& r : d.records) {
      auto* out = p->add_records();
      ToProto(r, out->mutable_record());
      if (r.producer) {
        out->set_producer_id(r.producer->producer_id);
        out->set_producer_epoch(r.producer->epoch);
        out->set_base_sequence(r.producer->base_sequence);
        out->set_batch_count(r.producer->count);
        out->set_batch_index(r.producer->index);
      }
    }
  }
}

ReplicaFetchData FromProto(pb::ReplicaPartitionData&& data) {
  ReplicaFetchData out;
  out.topic = data.topic();
  out.topic_id = TopicId(data.topic_id());
  out.partition = data.partition();
  out.status = absl::Status(static_cast<absl::StatusCode>(data.error_code()), data.error_message());
  if (data.has_truncate_to()) out.truncate_to = data.truncate_to();
  out.high_watermark = data.high_watermark();
  out.log_start_offset = data.log_start_offset();
  out.log_end_offset = data.log_end_offset();
  out.encoded.bytes = std::move(*data.mutable_stored_records());
  out.records.reserve(data.records_size());
  for (auto& r : *data.mutable_records()) {
    StoredRecord record = FromProto(std::move(*r.mutable_record()));
    if (r.producer_id() != 0) {
      record.producer = ProducerTag{r.producer_id(), r.producer_epoch(), r.base_sequence(),
                                    r.batch_count(), r.batch_index()};
    }
    out.records.push_back(std::move(record));
  }
  return out;
}

}  // namespace conduit::log_broker::replication
