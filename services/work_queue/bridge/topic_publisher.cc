#include "services/work_queue/bridge/topic_publisher.h"

#include <atomic>

#include "common/status/status_macros.h"

namespace conduit::work_queue::bridge {

TopicPublisher::~TopicPublisher() {
  absl::MutexLock lock(&mu_);
  for (auto& [topic, producer] : producers_) (void)producer->Flush();
}

absl::StatusOr<client::Producer*> TopicPublisher::ProducerFor(const std::string& topic) {
  absl::MutexLock lock(&mu_);
  auto it = producers_.find(topic);
  if (it != producers_.end()) return it->second.get();
  client::ProducerOptions options;
  options.address = bootstrap_;
  options.topic = topic;
  options.producer_name = "queue-redrive." + topic;
  CONDUIT_ASSIGN_OR_RETURN(std::unique_ptr<client::Producer> producer,
                           client::Producer::Create(std::move(options)));
  client::Producer* raw = producer.get();
  producers_.emplace(topic, std::move(producer));
  return raw;
}

void TopicPublisher::Publish(std::vector<RepublishedRecord> records,
                             std::function<void(absl::Status)> done) {
  struct Pending {
    std::atomic<size_t> left;
    absl::Mutex mu;
    absl::Status first_error ABSL_GUARDED_BY(mu);
    std::function<void(absl::Status)> done;
  };
  auto pending = std::make_shared<Pending>();
  pending->left = records.size();
  pending->done = std::move(done);
  auto finish_one = [pending](absl::Status s) {
    if (!s.ok()) {
      absl::MutexLock lock(&pending->mu);
      if (pending->first_error.ok()) pending->first_error = s;
    }
    if (--pending->left == 0) {
      absl::Status result;
      {
        absl::MutexLock lock(&pending->mu);
        result = pending->first_error;
      }
      pending->done(result);
    }
  };
  if (records.empty()) return pending->done(absl::OkStatus());
  for (RepublishedRecord& r : records) {
    auto producer = ProducerFor(r.topic);
    if (!producer.ok()) {
      finish_one(producer.status());
      continue;
    }
    client::ProducerRecord record;
    record.key = std::move(r.key);
    record.value = std::move(r.value);
    for (Header& h : r.headers) record.headers.emplace_back(std::move(h.key), std::move(h.value));
    record.event_id = std::move(r.event_id);
    (*producer)->Send(std::move(record), [finish_one](absl::StatusOr<client::RecordPosition> p) {
      finish_one(p.status());
    });
  }  // sent within the producers' linger; answered on their threads
}

}  // namespace conduit::work_queue::bridge
