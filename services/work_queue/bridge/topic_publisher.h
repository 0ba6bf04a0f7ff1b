#pragma once

// RecordPublisher over client::Producer: one idempotent producer per topic, created on first use,
// reading from the bridges' bootstrap brokers. Thread-safe.

#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "client/producer.h"
#include "services/work_queue/domain/record_publisher.h"

namespace conduit::work_queue::bridge {

class TopicPublisher final : public RecordPublisher {
 public:
  explicit TopicPublisher(std::string bootstrap) : bootstrap_(std::move(bootstrap)) {}
  ~TopicPublisher() override;  // flushes what is in flight

  void Publish(std::vector<RepublishedRecord> records,
               std::function<void(absl::Status)> done) override;

 private:
  absl::StatusOr<client::Producer*> ProducerFor(const std::string& topic);

  const std::string bootstrap_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<client::Producer>> producers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace conduit::work_queue::bridge
