#pragma once

// Fakes of the relay's interfaces: an in-memory outbox table whose sessions contend for one
// lock, and a publisher that records what it was asked to publish.

#include <atomic>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tools/outbox_relay/outbox_store.h"

namespace conduit::outbox {

// The table and its advisory lock, shared by the sessions (FakeOutboxStore) of several relays.
struct FakeTable {
  std::map<int64_t, OutboxRow> rows;  // by sequence
  std::set<int64_t> published;
  const void* lock_holder = nullptr;  // the session holding the advisory lock
  std::vector<std::string> calls;     // "read", "mark 1,2", in order, across sessions

  void Insert(int n, absl::Time at) {
    for (int i = 0; i < n; ++i) {
      const int64_t seq = rows.empty() ? 1 : rows.rbegin()->first + 1;
      OutboxRow row;
      row.sequence = seq;
      row.event_id = absl::StrCat("ev-", seq);
      row.aggregate_id = absl::StrCat("agg-", seq % 3);
      row.occurred_at = at;
      rows[seq] = row;
    }
  }
};

// One session on a FakeTable. Errors can be injected per call kind.
class FakeOutboxStore final : public OutboxStore {
 public:
  explicit FakeOutboxStore(FakeTable* table) : table_(table) {}

  absl::StatusOr<bool> TryLock() override {
    ++lock_attempts;
    if (fail_connect) return absl::UnavailableError("database down");
    open_ = true;
    if (table_->lock_holder == nullptr) table_->lock_holder = this;
    return table_->lock_holder == this;
  }
  absl::StatusOr<std::vector<OutboxRow>> ReadUnpublished(int limit) override {
    if (!open_ || table_->lock_holder != this) return absl::FailedPreconditionError("no lock");
    if (fail_reads > 0) {
      --fail_reads;
      return absl::UnavailableError("session lost");
    }
    table_->calls.push_back("read");
    std::vector<OutboxRow> out;
    for (const auto& [seq, row] : table_->rows) {
      if (static_cast<int>(out.size()) == limit) break;
      if (!table_->published.count(seq)) out.push_back(row);
    }
    return out;
  }
  absl::Status MarkPublished(const std::vector<int64_t>& sequences) override {
    if (!open_ || table_->lock_holder != this) return absl::FailedPreconditionError("no lock");
    if (fail_marks > 0) {
      --fail_marks;
      return absl::UnavailableError("session lost");
    }
    std::string call = "mark";
    for (int64_t s : sequences) {
      absl::StrAppend(&call, " ", s);
      table_->published.insert(s);
    }
    table_->calls.push_back(call);
    return absl::OkStatus();
  }
  absl::StatusOr<bool> WaitForInsert(absl::Duration timeout) override { return false; }
  void Reset() override {
    open_ = false;
    if (table_->lock_holder == this) table_->lock_holder = nullptr;
  }
  void Interrupt() override {}

  bool fail_connect = false;
  int fail_reads = 0;
  int fail_marks = 0;
  std::atomic<int> lock_attempts{0};  // read by a test thread while Run calls

 private:
  FakeTable* table_;
  bool open_ = false;
};

// Acknowledges every row except those told to fail; records the event ids in publish order.
class FakePublisher final : public EventPublisher {
 public:
  explicit FakePublisher(FakeTable* table) : table_(table) {}

  std::vector<absl::Status> Publish(const std::vector<OutboxRow>& rows) override {
    std::vector<absl::Status> out;
    for (const OutboxRow& row : rows) {
      table_->calls.push_back(absl::StrCat("publish ", row.sequence));
      published.push_back(row.event_id);
      out.push_back(fail_event_ids.count(row.event_id) ? absl::UnavailableError("broker down")
                                                       : absl::OkStatus());
    }
    return out;
  }

  std::set<std::string> fail_event_ids;
  std::vector<std::string> published;  // every publish, repeats included

 private:
  FakeTable* table_;
};

// Remembers the last report of each kind.
class RecordingObserver final : public RelayObserver {
 public:
  void OnActive(bool a) override { active = a; }
  void OnPublished(int64_t rows) override { published += rows; }
  void OnError(absl::string_view) override { ++errors; }
  void OnBacklogAge(absl::Duration a) override { age = a; }

  bool active = false;
  int64_t published = 0;
  int errors = 0;
  absl::Duration age = absl::InfiniteDuration();
};

}  // namespace conduit::outbox
