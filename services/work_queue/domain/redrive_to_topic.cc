// WorkQueue: redriving dead letters to a topic (a log consumer's letters go back to the log, with
// their key and event id, so version guards and dedup windows absorb repeats).

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "services/work_queue/domain/queue_rules.h"
#include "services/work_queue/domain/work_queue.h"

namespace conduit::work_queue {

RepublishedRecord RecordOfDeadLetter(const Job& letter, const std::string& topic,
                                     const std::optional<std::string>& replacement) {
  RepublishedRecord r;
  r.topic = !topic.empty() ? topic : letter.source ? letter.source->topic : "";
  r.value = replacement.value_or(letter.payload);
  for (const Header& h : letter.headers) {
    if (h.key == "conduit-source-key") {
      r.key = h.value;
    } else if (h.key == "conduit-event-id") {
      r.event_id = h.value;
    } else if (!absl::StartsWith(h.key, "conduit-")) {
      r.headers.push_back(h);
    }
  }
  return r;
}

void WorkQueue::SetPublisher(RecordPublisher* publisher) {
  absl::MutexLock lock(&mu_);
  publisher_ = publisher;
}

void WorkQueue::RedriveToTopic(const std::string& queue, const DeadLetterSelection& selection,
                               std::optional<std::string> replacement_payload,
                               const std::string& topic, Callback<RedriveResult> done) {
  if (auto s = ValidateSelection(selection.ids, !selection.filter.empty(), selection.limit);
      !s.ok()) {
    return done(s);
  }
  if (replacement_payload &&
      (selection.ids.empty() || replacement_payload->size() > kMaxPayloadBytes)) {
    return done(
        absl::InvalidArgumentError("a replacement payload (at most 1 MiB) needs explicit job ids"));
  }
  std::vector<RepublishedRecord> records;
  RedriveResult result;
  RecordPublisher* publisher = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto found = FindForChange(queue);
    if (!found.ok()) return ReplyAfterLog(std::move(done), found.status());
    if (publisher_ == nullptr) {
      return ReplyAfterLog(
          std::move(done),
          absl::FailedPreconditionError("this queue server has no log to redrive to (start it with "
                                        "--bridge-bootstrap, or run conduit-standalone)"));
    }
    publisher = publisher_;
    auto jobs = (*found)->ReadDeadLetters(selection);
    if (!jobs.ok()) return ReplyAfterLog(std::move(done), jobs.status());
    for (const Job& job : *jobs) {
      const uint64_t id = job.id;
      RepublishedRecord r = RecordOfDeadLetter(job, topic, replacement_payload);
      if (r.topic.empty()) {
        result.refused.push_back(id);  // no source topic and none named
        continue;
      }
      result.moved.push_back(id);
      records.push_back(std::move(r));
    }
    if (selection.dry_run || records.empty()) {
      Commit(QueueWrite{}, [done = std::move(done), result](absl::Status s) {
        if (!s.ok()) return done(s);
        done(result);
      });
      return;
    }
  }
  publisher->Publish(std::move(records), [this, queue, result, topic,
                                          done = std::move(done)](absl::Status published) mutable {
    if (!published.ok()) {
      return done(absl::Status(published.code(),
                               absl::StrCat("redrive to topic: ", published.message(),
                                            " (the letters stay; a retry is deduplicated by event "
                                            "id where the topic has a dedup window)")));
    }
    absl::MutexLock lock(&mu_);
    auto found = FindForChange(queue);
    if (!found.ok()) return ReplyAfterLog(std::move(done), found.status());
    QueueWrite write{.queue_id = (*found)->id()};
    (*found)->RemoveRedriven(result.moved, topic, Now(), &write);
    CommitAndReply(&write, std::move(done), result);
  });
}

}  // namespace conduit::work_queue
