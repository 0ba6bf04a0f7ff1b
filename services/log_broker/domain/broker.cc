#include "services/log_broker/domain/broker.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "services/log_broker/domain/limits.h"
#include "services/log_broker/domain/murmur2.h"
#include "services/log_broker/domain/validation.h"

namespace conduit::log_broker {
namespace {

// Queue accounting charges each record a little beyond its payload (offset, times, framing).
constexpr int64_t kRecordOverheadBytes = 32;

absl::Status FetchQueueFull() {
  return absl::ResourceExhaustedError("storage read queue is full; retry after 10ms");
}

}  // namespace

Broker::Broker(LogStore* store, const time::Clock* clock, BrokerObserver* observer,
               BrokerOptions options)
    : store_(store),
      clock_(clock),
      observer_(observer),
      options_(options),
      reads_("log-reads", options.storage_threads, options.max_queued_reads),
      pipeline_(store, observer, clock, options.pipeline) {}

Broker::~Broker() = default;

absl::Status Broker::Recover() {
  auto topics = store_->LoadTopics();
  if (!topics.ok()) return topics.status();
  absl::Time latest_append = absl::InfinitePast();
  absl::MutexLock lock(&mu_);
  for (TopicMeta& meta : *topics) {
    auto state = std::make_shared<TopicState>(meta);
    for (int32_t p = 0; p < meta.partitions; ++p) {
      auto extent = store_->RecoverPartition(meta.id, p);
      if (!extent.ok()) return extent.status();
      PartitionState& part = state->partitions[p];
      part.next_offset = extent->next_offset;
      absl::MutexLock plock(&part.mu);
      part.high_watermark = extent->next_offset;
      part.log_start_offset = extent->log_start_offset;
      part.last_append_time = extent->last_append_time;
      latest_append = std::max(latest_append, extent->last_append_time);
      observer_->OnHighWatermark(meta.name, p, extent->next_offset);
    }
    if (meta.config.durability == Durability::kInterval) {
      pipeline_.RequestSyncEvery(meta.config.flush_interval);
    }
    next_topic_id_ = std::max(next_topic_id_, meta.id + 1);
    topics_.emplace(meta.name, std::move(state));
  }
  pipeline_.SetLastAppendTime(latest_append);
  return absl::OkStatus();
}

absl::StatusOr<TopicMeta> Broker::CreateTopic(const std::string& name, int32_t partitions,
                                              TopicConfig config) {
  if (auto s = ValidateTopicName(name); !s.ok()) return s;
  if (auto s = ValidatePartitionCount(partitions); !s.ok()) return s;
  auto normalized = NormalizeConfig(config);
  if (!normalized.ok()) return normalized.status();

  // admin_mu_ serializes topic changes; mu_ is held only for map access, so RocksDB work here
  // never stalls produce and fetch looking up their topics.
  absl::MutexLock admin(&admin_mu_);
  TopicMeta meta;
  {
    absl::MutexLock lock(&mu_);
    if (topics_.contains(name)) {
      return absl::AlreadyExistsError(absl::StrCat("topic '", name, "' already exists"));
    }
    meta = TopicMeta{next_topic_id_, name, partitions, *normalized, clock_->Now()};
  }
  if (auto s = store_->CreateTopic(meta); !s.ok()) return s;
  if (meta.config.durability == Durability::kInterval) {
    pipeline_.RequestSyncEvery(meta.config.flush_interval);
  }
  absl::MutexLock lock(&mu_);
  ++next_topic_id_;
  topics_.emplace(name, std::make_shared<TopicState>(meta));
  return meta;
}

absl::Status Broker::DeleteTopic(const std::string& name) {
  absl::MutexLock admin(&admin_mu_);
  auto found = FindTopic(name);
  if (!found.ok()) return found.status();
  std::shared_ptr<TopicState> topic = *std::move(found);
  absl::Status status;
  // Between batches, so no write to the topic is half-done when its records go.
  pipeline_.RunExclusive([&] {
    status = store_->DeleteTopic(topic->meta);
    if (status.ok()) topic->deleted.store(true);
  });
  if (!status.ok()) return status;
  {
    absl::MutexLock lock(&mu_);
    topics_.erase(name);
  }
  observer_->OnTopicDeleted(name, topic->meta.partitions);
  // Wake long-polls: their reads now fail NOT_FOUND.
  for (PartitionState& part : topic->partitions) {
    std::vector<std::function<void()>> wake;
    {
      absl::MutexLock lock(&part.mu);
      for (auto& [id, fn] : part.waiters) wake.push_back(std::move(fn));
      part.waiters.clear();
    }
    for (auto& fn : wake) fn();
  }
  return absl::OkStatus();
}

std::vector<TopicMeta> Broker::ListTopics() const {
  std::vector<TopicMeta> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, topic] : topics_) out.push_back(topic->meta);
  }
  std::sort(out.begin(), out.end(),
            [](const TopicMeta& a, const TopicMeta& b) { return a.name < b.name; });
  return out;
}

absl::StatusOr<TopicDescription> Broker::DescribeTopic(const std::string& name) const {
  auto topic = FindTopic(name);
  if (!topic.ok()) return topic.status();
  TopicDescription out{(*topic)->meta, {}};
  for (int32_t p = 0; p < out.meta.partitions; ++p) {
    const PartitionState& part = (*topic)->partitions[p];
    absl::MutexLock lock(&part.mu);
    out.partitions.push_back(
        PartitionDescription{p, part.log_start_offset, part.high_watermark, part.last_append_time});
  }
  return out;
}

absl::Status Broker::RunBlocking(std::function<void()> fn) {
  if (!reads_.TrySubmit(std::move(fn))) {
    return absl::ResourceExhaustedError("storage executor is busy; retry after 10ms");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<TopicState>> Broker::FindTopic(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = topics_.find(name);
  if (it == topics_.end()) {
    return absl::NotFoundError(absl::StrCat("topic '", name, "' does not exist"));
  }
  return it->second;
}

absl::Status Broker::CheckPartition(const TopicState& topic, int32_t partition) const {
  if (partition < 0 || partition >= topic.meta.partitions) {
    return absl::NotFoundError(absl::StrFormat("partition %d of topic '%s' does not exist (it has %d)",
                                               partition, topic.meta.name, topic.meta.partitions));
  }
  return absl::OkStatus();
}

absl::Status Broker::Produce(const std::string& topic_name, std::vector<ProduceRecordArgs> records,
                             ProduceCallback done) {
  auto topic = FindTopic(topic_name);
  if (!topic.ok()) return topic.status();
  const TopicMeta& meta = (*topic)->meta;
  if (records.empty()) return absl::InvalidArgumentError("produce request has no records");
  if (records.size() > static_cast<size_t>(kMaxRecordsPerProduce)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "produce request has %d records; the limit is %d", records.size(), kMaxRecordsPerProduce));
  }
  std::vector<RoutedRecord> routed;
  routed.reserve(records.size());
  std::optional<int32_t> sticky;
  int64_t bytes = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    ProduceRecordArgs& r = records[i];
    if (auto s = ValidateRecord(meta, r.data, r.partition, i); !s.ok()) return s;
    int32_t partition;
    if (r.partition) {
      partition = *r.partition;
    } else if (r.data.key) {
      partition = PartitionForKey(*r.data.key, meta.partitions);
    } else {
      if (!sticky) sticky = (*topic)->sticky_cursor.fetch_add(1) % meta.partitions;
      partition = *sticky;
    }
    bytes += static_cast<int64_t>(r.data.PayloadBytes()) + kRecordOverheadBytes;
    routed.push_back(RoutedRecord{partition, std::move(r.data)});
  }
  if (bytes > kMaxProduceRequestBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "produce request is %d bytes; the limit is %d", bytes, kMaxProduceRequestBytes));
  }
  return pipeline_.Submit(*std::move(topic), std::move(routed), bytes, std::move(done));
}

absl::Status Broker::Fetch(const FetchArgs& args, FetchCallback done,
                           std::shared_ptr<PendingFetch>* pending) {
  auto found = FindTopic(args.topic);
  if (!found.ok()) return found.status();
  std::shared_ptr<TopicState> topic = *std::move(found);
  if (auto s = CheckPartition(*topic, args.partition); !s.ok()) return s;
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

  PartitionState& part = topic->partitions[args.partition];
  int64_t hw, start;
  {
    absl::MutexLock lock(&part.mu);
    hw = part.high_watermark;
    start = part.log_start_offset;
  }
  if (args.offset < start || args.offset > hw) {
    return absl::OutOfRangeError(absl::StrFormat(
        "offset %d is outside partition %d of topic '%s': valid offsets are %d..%d", args.offset,
        args.partition, args.topic, start, hw));
  }
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
  wait->timer_ = timers_.Schedule(absl::Now() + args.max_wait, [wait] { wait->Fire(); });
  bool read_now = false;
  {
    absl::MutexLock lock(&part.mu);
    if (part.high_watermark > args.offset) {
      read_now = true;  // an append landed since we looked
    } else if (!wait->fired_.load()) {
      part.waiters.emplace(wait->waiter_id_, [wait] { wait->Fire(); });
    }
  }
  if (pending != nullptr) *pending = wait;
  if (read_now) wait->Fire();
  return absl::OkStatus();
}

void PendingFetch::Fire() {
  if (fired_.exchange(true)) return;
  broker_->timers_.Cancel(timer_);
  {
    absl::MutexLock lock(&part_->mu);
    part_->waiters.erase(waiter_id_);
  }
  auto read = std::move(read_);
  read();
}

void Broker::StartRead(std::shared_ptr<TopicState> topic, FetchArgs args, FetchCallback done) {
  auto read = [this, topic, args, done]() {
    if (topic->deleted.load()) {
      done(absl::NotFoundError(absl::StrCat("topic '", args.topic, "' was deleted")));
      return;
    }
    PartitionState& part = topic->partitions[args.partition];
    FetchResult result;
    {
      absl::MutexLock lock(&part.mu);
      result.high_watermark = part.high_watermark;
      result.log_start_offset = part.log_start_offset;
    }
    if (args.offset < result.log_start_offset) {
      done(absl::OutOfRangeError(absl::StrFormat(
          "offset %d is below the log start %d of partition %d of topic '%s'", args.offset,
          result.log_start_offset, args.partition, args.topic)));
      return;
    }
    auto records = store_->Read(topic->meta.id, args.partition, args.offset, result.high_watermark,
                                args.max_records.value_or(kDefaultFetchRecords),
                                args.max_bytes.value_or(kDefaultFetchBytes));
    if (!records.ok()) {
      done(records.status());
      return;
    }
    int64_t bytes = 0;
    for (const auto& r : *records) bytes += static_cast<int64_t>(r.data.PayloadBytes());
    observer_->OnFetched(args.topic, static_cast<int64_t>(records->size()), bytes);
    result.records = *std::move(records);
    done(std::move(result));
  };
  if (!reads_.TrySubmit(read)) done(FetchQueueFull());
}

absl::StatusOr<std::vector<RecordPosition>> Broker::ListOffsets(
    const std::string& topic_name, const std::vector<int32_t>& partitions, OffsetQuery query,
    absl::Time at) {
  auto topic = FindTopic(topic_name);
  if (!topic.ok()) return topic.status();
  std::vector<int32_t> wanted = partitions;
  if (wanted.empty()) {
    for (int32_t p = 0; p < (*topic)->meta.partitions; ++p) wanted.push_back(p);
  }
  for (int32_t p : wanted) {
    if (auto s = CheckPartition(**topic, p); !s.ok()) return s;
  }
  std::vector<RecordPosition> out;
  for (int32_t p : wanted) {
    const PartitionState& part = (*topic)->partitions[p];
    int64_t offset;
    if (query == OffsetQuery::kTimestamp) {
      auto found = OffsetForTime(**topic, p, at);
      if (!found.ok()) return found.status();
      offset = *found;
    } else {
      absl::MutexLock lock(&part.mu);
      offset = query == OffsetQuery::kEarliest ? part.log_start_offset : part.high_watermark;
    }
    out.push_back(RecordPosition{p, offset});
  }
  return out;
}

absl::StatusOr<int64_t> Broker::OffsetForTime(const TopicState& topic, int32_t partition,
                                              absl::Time at) {
  int64_t lo, hi;
  {
    const PartitionState& part = topic.partitions[partition];
    absl::MutexLock lock(&part.mu);
    lo = part.log_start_offset;
    hi = part.high_watermark;
  }
  const int64_t hw = hi;
  // Append time never decreases within a partition, so binary search over offsets. Each probe
  // reads the first stored record at or after `mid` (offsets may have holes).
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    auto probe = store_->Read(topic.meta.id, partition, mid, hw, 1, 1);
    if (!probe.ok()) return probe.status();
    if (probe->empty() || probe->front().append_time >= at) {
      hi = mid;
    } else {
      lo = probe->front().offset + 1;
    }
  }
  if (lo >= hw) return hw;
  auto first = store_->Read(topic.meta.id, partition, lo, hw, 1, 1);
  if (!first.ok()) return first.status();
  return first->empty() ? hw : first->front().offset;
}

}  // namespace conduit::log_broker
