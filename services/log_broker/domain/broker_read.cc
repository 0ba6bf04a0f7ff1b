// Broker reads: Fetch with long-poll, and offset lookups.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status/status_macros.h"
#include "services/log_broker/domain/broker.h"
#include "services/log_broker/domain/limits.h"
#include "services/log_broker/domain/offset_search.h"

namespace conduit::log_broker {
namespace {

absl::Status OutOfRange(const FetchArgs& args, int64_t start, int64_t end) {
  return absl::OutOfRangeError(
      absl::StrFormat("offset %d is outside partition %d of topic '%s': valid offsets are %d..%d",
                      args.offset, args.partition, args.topic, start, end));
}

// INVALID_ARGUMENT when the offset is negative or a limit is out of its bounds.
absl::Status CheckFetchLimits(const FetchArgs& args) {
  if (args.offset < 0) {
    return absl::InvalidArgumentError(absl::StrCat("offset must be >= 0, got ", args.offset));
  }
  if (args.max_records && (*args.max_records < 1 || *args.max_records > kMaxFetchRecords)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max_records must be between 1 and %d, got %d", kMaxFetchRecords, *args.max_records));
  }
  if (args.max_bytes && (*args.max_bytes < 1 || *args.max_bytes > kMaxFetchBytes)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max_bytes must be between 1 and %d, got %d", kMaxFetchBytes, *args.max_bytes));
  }
  if (args.max_wait < absl::ZeroDuration() || args.max_wait > kMaxFetchWait) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_wait must be between 0 and ", absl::FormatDuration(kMaxFetchWait),
                     ", got ", absl::FormatDuration(args.max_wait)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Broker::Fetch(const FetchArgs& args, FetchCallback done,
                           std::function<void(std::shared_ptr<PendingFetch>)> on_wait) {
  auto found = topics_.Find(args.topic);
  if (!found.ok()) return found.status();
  std::shared_ptr<TopicState> topic = *std::move(found);
  CONDUIT_RETURN_IF_ERROR(TopicTable::CheckPartition(*topic, args.partition));
  CONDUIT_RETURN_IF_ERROR(topics_.CheckServing(*topic, args.partition, /*write=*/false));
  CONDUIT_RETURN_IF_ERROR(CheckFetchLimits(args));

  PartitionLog& part = topic->partitions[args.partition];
  const PartitionLog::Extent extent = part.extent();
  const int64_t hw = extent.high_watermark, start = extent.log_start;
  const int64_t end = std::max(hw, extent.log_end);
  // Up to the log end, not only the high watermark: a leader newly elected may not yet know
  // the high watermark its predecessor had, and a reader who saw records up to it must be able
  // to wait there (as Kafka answers such a fetch: no records until the watermark passes).
  if (args.offset < start || args.offset > end) return OutOfRange(args, start, end);
  if (args.offset < hw || args.max_wait == absl::ZeroDuration()) {
    StartRead(std::move(topic), args, std::move(done));
    return absl::OkStatus();
  }

  // Long-poll: whichever comes first (an append past `offset`, the deadline, or Cancel) starts
  // the read.
  auto wait = std::make_shared<PendingFetch>();
  wait->broker_ = this;
  wait->topic_ = topic;
  wait->part_ = &part;
  wait->waiter_id_ = next_waiter_id_.fetch_add(1);
  wait->read_ = [this, topic, args, done]() { StartRead(topic, args, done); };
  wait->timer_.store(scope_.After(args.max_wait, [wait] { wait->Fire(); }));
  // The caller learns of the wait before anything can complete it.
  if (on_wait) on_wait(wait);
  // An append landed since we looked, or DeleteTopic already woke this partition's waiters (or
  // the wait has ended already).
  if (part.AwaitHighWatermarkPast(
          args.offset, wait->waiter_id_,
          [&] { return topic->deleted.load() || wait->fired_.load(); }, [wait] { wait->Fire(); })) {
    wait->Fire();
  }
  return absl::OkStatus();
}

void PendingFetch::Fire() {
  if (fired_.exchange(true)) return;
  broker_->scope_.Cancel(timer_.load());
  part_->ForgetWaiter(waiter_id_);
  auto read = std::move(read_);
  read();
}

void Broker::StartRead(std::shared_ptr<TopicState> topic, FetchArgs args, FetchCallback done) {
  auto read = [this, topic, args, done]() {
    if (topic->deleted.load()) {
      done(topic->DeletedError());
      return;
    }
    PartitionLog& part = topic->partitions[args.partition];
    FetchResult result;
    {
      const PartitionLog::Extent extent = part.extent();
      result.high_watermark = extent.high_watermark;
      result.log_start_offset = extent.log_start;
    }
    if (args.offset < result.log_start_offset) {
      done(OutOfRange(args, result.log_start_offset, result.high_watermark));
      return;
    }
    auto records = store_->Read(topic->id, args.partition, args.offset, result.high_watermark,
                                args.max_records.value_or(kDefaultFetchRecords),
                                args.max_bytes.value_or(kDefaultFetchBytes));
    if (!records.ok()) {
      done(records.status());
      return;
    }
    if (records->empty() && args.offset < result.high_watermark) {
      // Either retention removed the range while we read (then the start moved: say so), or
      // compaction left only a gap up to the high watermark (then skip it).
      const PartitionLog::Extent now = part.extent();
      if (args.offset < now.log_start) {
        done(OutOfRange(args, now.log_start, now.high_watermark));
        return;
      }
    }
    int64_t bytes = 0;
    for (const auto& r : *records) bytes += static_cast<int64_t>(r.data.PayloadBytes());
    observer_->OnFetched(args.topic, static_cast<int64_t>(records->size()), bytes);
    result.next_offset = records->empty() ? std::max(args.offset, result.high_watermark)
                                          : records->back().offset + 1;
    result.records = *std::move(records);
    done(std::move(result));
  };
  if (!scope_.Submit(read)) {
    done(absl::ResourceExhaustedError("storage read queue is full; retry after 10ms"));
  }
}

absl::StatusOr<std::vector<RecordPosition>> Broker::ListOffsets(
    const std::string& topic_name, const std::vector<int32_t>& partitions, OffsetQuery query,
    absl::Time at) {
  auto topic = topics_.Find(topic_name);
  if (!topic.ok()) return topic.status();
  std::vector<int32_t> wanted = partitions;
  if (wanted.empty()) {
    for (int32_t p = 0; p < (*topic)->partition_count; ++p) wanted.push_back(p);
  }
  for (int32_t p : wanted) {
    CONDUIT_RETURN_IF_ERROR(TopicTable::CheckPartition(**topic, p));
    CONDUIT_RETURN_IF_ERROR(topics_.CheckServing(**topic, p, /*write=*/false));
  }
  std::vector<RecordPosition> out;
  for (int32_t p : wanted) {
    const PartitionLog::Extent extent = (*topic)->partitions[p].extent();
    const int64_t start = extent.log_start, hw = extent.high_watermark;
    int64_t offset = query == OffsetQuery::kEarliest ? start : hw;
    if (query == OffsetQuery::kTimestamp) {
      auto found = FirstOffsetAtOrAfter(store_, (*topic)->id, p, start, hw, at);
      if (!found.ok()) return found.status();
      offset = *found;
    }
    out.push_back(RecordPosition{p, offset});
  }
  return out;
}

absl::StatusOr<Broker::EpochEnd> Broker::OffsetForLeaderEpoch(const std::string& topic_name,
                                                              int32_t partition,
                                                              LeaderEpoch epoch) const {
  CONDUIT_ASSIGN_OR_RETURN(std::shared_ptr<TopicState> topic, topics_.Find(topic_name));
  CONDUIT_RETURN_IF_ERROR(TopicTable::CheckPartition(*topic, partition));
  return topic->partitions[partition].EndOfEpoch(epoch);
}

}  // namespace conduit::log_broker
