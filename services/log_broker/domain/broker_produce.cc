// Broker produce: routing and checking records, Produce and ProduceParts, and the idempotent
// producer's arguments.

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/hash/murmur2.h"
#include "common/status/status_macros.h"
#include "services/log_broker/domain/broker.h"
#include "services/log_broker/domain/limits.h"
#include "services/log_broker/domain/validation.h"

namespace conduit::log_broker {
namespace {

// Queue accounting charges each record a little beyond its payload (offset, times, framing).
constexpr int64_t kRecordOverheadBytes = 32;

absl::StatusOr<ProducerStamp> CheckProducerArgs(const ProducerArgs& producer,
                                                const std::vector<RoutedRecord>& routed) {
  if (producer.producer_id.value() <= 0) {
    return absl::InvalidArgumentError("producer_id must be positive (from InitProducer)");
  }
  ProducerStamp stamp{producer.producer_id, producer.epoch, {}};
  for (const auto& [partition, base] : producer.base_sequences) {
    if (!stamp.base_sequences.emplace(partition, base).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("partition ", partition, " has two base sequences"));
    }
  }
  absl::flat_hash_map<int32_t, bool> touched;
  for (const RoutedRecord& r : routed) touched[r.partition] = true;
  for (const auto& [partition, unused] : touched) {
    if (!stamp.base_sequences.contains(partition)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "records go to partition ", partition, " but the request has no base sequence for it"));
    }
  }
  if (touched.size() != stamp.base_sequences.size()) {
    return absl::InvalidArgumentError(
        "the request has a base sequence for a partition none of its records go to");
  }
  return stamp;
}

}  // namespace

absl::StatusOr<std::vector<RoutedRecord>> Broker::RouteRecords(
    TopicState& topic, const TopicMeta& meta, std::vector<ProduceRecordArgs>& records,
    std::optional<int32_t>* sticky, int64_t* bytes) const {
  if (records.empty()) return absl::InvalidArgumentError("produce request has no records");
  if (records.size() > static_cast<size_t>(kMaxRecordsPerProduce)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "produce request has %d records; the limit is %d", records.size(), kMaxRecordsPerProduce));
  }
  std::vector<RoutedRecord> routed;
  routed.reserve(records.size());
  int64_t request_bytes = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    ProduceRecordArgs& r = records[i];
    CONDUIT_RETURN_IF_ERROR(ValidateRecord(meta, r.data, r.partition, i));
    int32_t partition;
    if (r.partition) {
      partition = *r.partition;
    } else if (r.data.key) {
      partition = hash::PartitionForKey(*r.data.key, meta.partitions);
    } else if (!r.data.event_id.empty() && meta.config.dedup_window > absl::ZeroDuration()) {
      // The dedup window is per partition: a retry must land where the first attempt did.
      partition = hash::PartitionForKey(r.data.event_id, meta.partitions);
    } else {
      if (!*sticky) *sticky = topics_.StickyPartition(topic);
      partition = **sticky;
    }
    request_bytes += static_cast<int64_t>(r.data.PayloadBytes()) + kRecordOverheadBytes;
    routed.push_back(RoutedRecord{partition, std::move(r.data)});
  }
  if (request_bytes > kMaxProduceRequestBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "produce request is %d bytes; the limit is %d", request_bytes, kMaxProduceRequestBytes));
  }
  *bytes += request_bytes;
  return routed;
}

absl::Status Broker::CheckWritable(const TopicState& topic, const std::vector<RoutedRecord>& routed,
                                   bool acks_all, absl::flat_hash_map<int32_t, Writable>* checked,
                                   bool* await_followers) const {
  for (const RoutedRecord& r : routed) {
    auto [it, fresh] = checked->try_emplace(r.partition);
    Writable& w = it->second;
    if (fresh) {
      w.status = topics_.CheckServing(topic, r.partition, /*write=*/true);
      if (w.status.ok() && acks_all) {
        w.status = replicas_.CheckInSync(topic, r.partition, &w.await_followers);
      }
    }
    CONDUIT_RETURN_IF_ERROR(w.status);
    *await_followers |= w.await_followers;
  }
  return absl::OkStatus();
}

absl::Status Broker::Produce(const std::string& topic_name, std::vector<ProduceRecordArgs> records,
                             std::optional<ProducerArgs> producer, ProduceCallback done,
                             std::optional<Acks> acks) {
  auto topic = topics_.Find(topic_name);
  if (!topic.ok()) return topic.status();
  const TopicMeta meta = (*topic)->meta();
  std::optional<int32_t> sticky;
  int64_t bytes = 0;
  auto routed = RouteRecords(**topic, meta, records, &sticky, &bytes);
  if (!routed.ok()) return routed.status();
  const bool acks_all = acks.value_or(meta.config.acks) == Acks::kAll;
  absl::flat_hash_map<int32_t, Writable> checked;
  bool await_followers = false;
  CONDUIT_RETURN_IF_ERROR(CheckWritable(**topic, *routed, acks_all, &checked, &await_followers));
  if (await_followers) done = replicas_.AwaitReplication(*topic, std::move(done));
  std::optional<ProducerStamp> stamp;
  if (producer) {
    auto checked = CheckProducerArgs(*producer, *routed);
    if (!checked.ok()) return checked.status();
    stamp = *std::move(checked);
  }
  return pipeline_.Submit(*std::move(topic), *std::move(routed), std::move(stamp), bytes,
                          std::move(done));
}

void Broker::ProduceParts(const std::string& topic_name, std::vector<ProducePart> parts,
                          std::optional<Acks> acks) {
  auto topic = topics_.Find(topic_name);
  if (!topic.ok()) {
    for (ProducePart& part : parts) part.done(topic.status());
    return;
  }
  const TopicMeta meta = (*topic)->meta();
  const bool acks_all = acks.value_or(meta.config.acks) == Acks::kAll;

  // One submission: the accepted parts' records in order, each part's count and callback.
  struct Group {
    std::vector<RoutedRecord> routed;
    int64_t bytes = 0;
    std::vector<std::pair<size_t, ProduceCallback>> parts;  // (records, done)
  };
  auto submit = [&](Group group) {
    if (group.parts.empty()) return;
    auto parts =
        std::make_shared<std::vector<std::pair<size_t, ProduceCallback>>>(std::move(group.parts));
    auto split = [parts](absl::StatusOr<ProduceResult> result) {
      size_t at = 0;
      for (auto& [count, done] : *parts) {
        if (!result.ok()) {
          done(result.status());
          continue;
        }
        ProduceResult mine;
        mine.append_time = result->append_time;
        mine.positions.assign(result->positions.begin() + static_cast<ptrdiff_t>(at),
                              result->positions.begin() + static_cast<ptrdiff_t>(at + count));
        at += count;
        done(std::move(mine));
      }
    };
    // Submit consumes its copy of `split` only when it queues the request.
    absl::Status refused =
        pipeline_.Submit(*topic, std::move(group.routed), std::nullopt, group.bytes, split);
    if (!refused.ok()) split(refused);  // refused up front: nothing queued, nothing called
  };

  std::optional<int32_t> sticky;
  absl::flat_hash_map<int32_t, Writable> checked;  // partition → CheckWritable's answer
  Group group;
  for (ProducePart& part : parts) {
    int64_t bytes = 0;
    auto routed = RouteRecords(**topic, meta, part.records, &sticky, &bytes);
    absl::Status refused = routed.status();
    bool await_followers = false;
    if (refused.ok()) {
      refused = CheckWritable(**topic, *routed, acks_all, &checked, &await_followers);
    }
    if (!refused.ok()) {
      part.done(refused);
      continue;
    }
    // A group stays within the limits of one request.
    if (group.routed.size() + routed->size() > static_cast<size_t>(kMaxRecordsPerProduce) ||
        group.bytes + bytes > kMaxProduceRequestBytes) {
      submit(std::exchange(group, Group{}));
    }
    group.routed.insert(group.routed.end(), std::make_move_iterator(routed->begin()),
                        std::make_move_iterator(routed->end()));
    group.bytes += bytes;
    // Acks all: each part waits for its own records only.
    ProduceCallback done = std::move(part.done);
    if (await_followers) done = replicas_.AwaitReplication(*topic, std::move(done));
    group.parts.emplace_back(routed->size(), std::move(done));
  }
  submit(std::move(group));
}

}  // namespace conduit::log_broker
