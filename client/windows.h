#pragma once

// Event-time windows over consumed records: fixed (tumbling), sliding (hopping) and session
// windows per key, a watermark over the partitions seen, and a policy for late records.
//
//   auto op = WindowOperator<int64_t>::Create(
//       {.spec = WindowSpec::Fixed(absl::Minutes(1)), .allowed_lateness = absl::Seconds(5)},
//       CountAggregate());
//   auto records = consumer->Poll(timeout);
//   for (const ConsumedRecord& r : *records) {
//     for (const auto& result : op->Add(r).results) Publish(result);
//   }
//
// No clock is read: the watermark moves only by the event times of the records added (and, with
// an idle timeout, by the `now` the caller passes).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/group_consumer.h"

namespace conduit::client {

// A record's event time, or its append time when the producer set none.
absl::Time EventTimeOf(const ConsumedRecord& r);

// A half-open interval of event time, [start, end).
struct Window {
  absl::Time start;
  absl::Time end;
  friend bool operator==(const Window& a, const Window& b) {
    return a.start == b.start && a.end == b.end;
  }
};

// Which windows a record belongs to. Fixed and sliding windows are aligned to the Unix epoch.
struct WindowSpec {
  enum class Kind { kFixed, kSliding, kSession };

  // Back-to-back windows of `size`: each record is in exactly one.
  static WindowSpec Fixed(absl::Duration size) { return {Kind::kFixed, size, size, {}}; }
  // Windows of `size` starting every `slide` (slide <= size): a record is in about size/slide.
  static WindowSpec Sliding(absl::Duration size, absl::Duration slide) {
    return {Kind::kSliding, size, slide, {}};
  }
  // Per key, records closer than `gap` to each other form one window [first, last + gap); a
  // record that bridges two sessions merges them.
  static WindowSpec Session(absl::Duration gap) { return {Kind::kSession, {}, {}, gap}; }

  // INVALID_ARGUMENT for a size, slide or gap that is not positive, or a slide above the size.
  absl::Status Validate() const;
  // Fixed and sliding: the windows that contain `t`, earliest start first.
  std::vector<Window> WindowsOf(absl::Time t) const;

  Kind kind;
  absl::Duration size;
  absl::Duration slide;
  absl::Duration gap;
};

// The watermark: the least, over the partitions (topic, partition) seen, of the highest event
// time seen in that partition minus the allowed lateness. It never goes back (a partition seen
// for the first time does not reopen what already fired). Before any record it is the infinite
// past.
//
// Idle rule (optional): a partition whose last record arrived `idle_timeout` or more before the
// `now` the caller passes stops holding the watermark back until its next record. `now` is the
// caller's processing time; with no `now` a partition is never idle. When every partition is
// idle the watermark stays where it is. Not thread-safe.
class Watermark {
 public:
  explicit Watermark(absl::Duration allowed_lateness,
                     absl::Duration idle_timeout = absl::InfiniteDuration())
      : allowed_lateness_(allowed_lateness), idle_timeout_(idle_timeout) {}

  // Takes in a record of `tp` with `event_time`, arriving at `now` (when known).
  void Observe(const TopicPartition& tp, absl::Time event_time, std::optional<absl::Time> now);
  // Applies the idle rule at `now`.
  void MarkIdle(absl::Time now);
  absl::Time current() const { return current_; }

 private:
  struct PartitionMark {
    absl::Time max_event_time = absl::InfinitePast();
    std::optional<absl::Time> last_arrival;
    bool idle = false;
  };
  void Recompute();

  const absl::Duration allowed_lateness_;
  const absl::Duration idle_timeout_;
  std::map<TopicPartition, PartitionMark> partitions_;
  absl::Time current_ = absl::InfinitePast();
};

// The caller's aggregate over the records of a window: `add` folds one record into the
// accumulator (which starts as `initial`); `merge` folds another window's accumulator in, and is
// needed by session windows only.
template <typename Acc>
struct Aggregate {
  Acc initial{};
  std::function<void(Acc&, const ConsumedRecord&)> add;
  std::function<void(Acc&, const Acc&)> merge;
};

// The number of records.
Aggregate<int64_t> CountAggregate();
// The sum of `value_of` over the records.
Aggregate<int64_t> SumAggregate(std::function<int64_t(const ConsumedRecord&)> value_of);

// What happens to a late record: one whose window the watermark already passed (for sessions:
// one that touches a session that fired, or whose merged session already ended).
enum class LatePolicy {
  kCorrect,     // add it and emit the window's new result, marked as a correction
  kSideOutput,  // leave the window as it fired and hand the record to the side output
};
// A sliding-window record is late only for its windows that fired: it still counts in the others
// (and goes to the side output once).

struct WindowOptions {
  WindowSpec spec = WindowSpec::Fixed(absl::Minutes(1));
  absl::Duration allowed_lateness = absl::ZeroDuration();
  LatePolicy late_policy = LatePolicy::kCorrect;
  // A late record is dropped, and counted (WindowOperator::dropped), once the watermark is this
  // far or further past its window's end (sessions: past the end of [event time, + gap)). A
  // fired window's state is kept until then (sessions: a gap longer), so this also bounds
  // memory; infinite keeps every window.
  absl::Duration drop_after = absl::InfiniteDuration();
  // The watermark's idle rule; infinite: off.
  absl::Duration idle_timeout = absl::InfiniteDuration();
};

// One window's result for one key. A correction replaces the results emitted before for this
// key and window (for a session: for every session inside `window`).
template <typename Acc>
struct WindowResult {
  std::optional<std::string> key;
  Window window;
  Acc value;
  bool correction = false;
};

template <typename Acc>
struct WindowOutput {
  // Corrections the record made first, then the windows that fired (by end, key, start).
  std::vector<WindowResult<Acc>> results;
  std::vector<ConsumedRecord> side_output;  // late records under LatePolicy::kSideOutput
};

// Groups records into windows by key and event time, and emits each window's aggregate once
// the watermark reaches the window's end; late records follow the LatePolicy. Owns the state of
// the windows not yet fired and of fired windows until `drop_after` passes. Not thread-safe:
// fed from the one thread that polls.
template <typename Acc>
class WindowOperator {
 public:
  // INVALID_ARGUMENT for a bad spec, a negative lateness or drop_after, an aggregate without
  // `add`, or session windows without `merge`.
  static absl::StatusOr<WindowOperator> Create(WindowOptions options, Aggregate<Acc> aggregate);

  // Adds one record (arriving at `now`, for the idle rule, when given) and returns the results
  // of the windows that fired because of it, corrections, and the side output.
  WindowOutput<Acc> Add(const ConsumedRecord& r, std::optional<absl::Time> now = std::nullopt);
  // Applies the idle rule at `now`; returns the windows that fired because of it.
  WindowOutput<Acc> AdvanceIdle(absl::Time now);

  absl::Time watermark() const { return watermark_.current(); }
  // Late records dropped beyond `drop_after`.
  int64_t dropped() const { return dropped_; }
  // Windows held (not fired, or fired and still open for late records).
  size_t windows_held() const { return held_; }

 private:
  using Key = std::optional<std::string>;
  using Index = std::set<std::tuple<absl::Time, Key, absl::Time>>;  // (time, key, start)
  struct Pane {
    absl::Time end;
    Acc acc;
    bool fired = false;    // the watermark reached `end` (and a result was emitted)
    bool emitted = false;  // a result for this window (or a session inside it) was emitted
  };
  using Panes = std::map<absl::Time, Pane>;  // by start

  WindowOperator(WindowOptions options, Aggregate<Acc> aggregate)
      : options_(std::move(options)),
        aggregate_(std::move(aggregate)),
        watermark_(options_.allowed_lateness, options_.idle_timeout) {}

  // Places `r` in fixed or sliding windows; true if it was dropped from one.
  bool AddToAligned(const ConsumedRecord& r, absl::Time t, WindowOutput<Acc>& out);
  // Places `r` in its key's sessions; true if it was dropped.
  bool AddToSession(const ConsumedRecord& r, absl::Time t, WindowOutput<Acc>& out);
  void Emit(const Key& key, absl::Time start, Pane& pane, WindowOutput<Acc>& out);
  // Drops pane bookkeeping from the indices.
  void Unindex(const Key& key, absl::Time start, const Pane& pane);
  absl::Time FreeAt(const Pane& pane) const;
  // Fires what the watermark passed and frees what `drop_after` passed.
  void Fire(WindowOutput<Acc>& out);

  const WindowOptions options_;
  const Aggregate<Acc> aggregate_;
  Watermark watermark_;
  std::map<Key, Panes> panes_;
  Index to_fire_;  // (end, key, start) of panes not fired
  Index to_free_;  // (free time, key, start) of fired panes
  size_t held_ = 0;
  int64_t dropped_ = 0;
};

// Implementation.

template <typename Acc>
absl::StatusOr<WindowOperator<Acc>> WindowOperator<Acc>::Create(WindowOptions options,
                                                                Aggregate<Acc> aggregate) {
  if (absl::Status s = options.spec.Validate(); !s.ok()) return s;
  if (options.allowed_lateness < absl::ZeroDuration() ||
      options.drop_after < absl::ZeroDuration() || options.idle_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "allowed lateness and drop_after must not be negative, and the idle timeout must be "
        "positive");
  }
  if (!aggregate.add) return absl::InvalidArgumentError("the aggregate has no add function");
  if (options.spec.kind == WindowSpec::Kind::kSession && !aggregate.merge) {
    return absl::InvalidArgumentError("session windows need the aggregate's merge function");
  }
  return WindowOperator(std::move(options), std::move(aggregate));
}

template <typename Acc>
WindowOutput<Acc> WindowOperator<Acc>::Add(const ConsumedRecord& r, std::optional<absl::Time> now) {
  WindowOutput<Acc> out;
  const absl::Time t = EventTimeOf(r);
  const bool dropped = options_.spec.kind == WindowSpec::Kind::kSession ? AddToSession(r, t, out)
                                                                        : AddToAligned(r, t, out);
  if (dropped) ++dropped_;
  if (auto it = panes_.find(r.key); it != panes_.end() && it->second.empty()) panes_.erase(it);
  watermark_.Observe({r.topic, r.partition}, t, now);
  if (now) watermark_.MarkIdle(*now);
  Fire(out);
  return out;
}

template <typename Acc>
WindowOutput<Acc> WindowOperator<Acc>::AdvanceIdle(absl::Time now) {
  WindowOutput<Acc> out;
  watermark_.MarkIdle(now);
  Fire(out);
  return out;
}

template <typename Acc>
bool WindowOperator<Acc>::AddToAligned(const ConsumedRecord& r, absl::Time t,
                                       WindowOutput<Acc>& out) {
  const absl::Time wm = watermark_.current();
  bool dropped = false, side = false;
  for (const Window& w : options_.spec.WindowsOf(t)) {
    const bool open = w.end > wm;  // not fired: added, however far behind the watermark `t` is
    if (!open && wm >= w.end + options_.drop_after) {
      dropped = true;
      continue;
    }
    if (!open && options_.late_policy == LatePolicy::kSideOutput) {
      side = true;
      continue;
    }
    auto [it, fresh] = panes_[r.key].try_emplace(w.start, Pane{w.end, aggregate_.initial});
    if (fresh) {
      ++held_;
      if (open) to_fire_.emplace(w.end, r.key, w.start);
    }
    aggregate_.add(it->second.acc, r);
    if (!open) Emit(r.key, w.start, it->second, out);  // kCorrect
  }
  if (side) out.side_output.push_back(r);
  return dropped;
}

template <typename Acc>
bool WindowOperator<Acc>::AddToSession(const ConsumedRecord& r, absl::Time t,
                                       WindowOutput<Acc>& out) {
  const absl::Time wm = watermark_.current();
  const absl::Duration gap = options_.spec.gap;
  Panes& panes = panes_[r.key];
  // A key's sessions are disjoint and sorted by start (so by end too): the ones [t, t + gap)
  // overlaps are a run just before the first session starting at or after t + gap.
  auto last = panes.lower_bound(t + gap);
  auto first = last;
  while (first != panes.begin() && std::prev(first)->second.end > t) --first;
  Window merged{t, t + gap};
  bool touches_fired = false, emitted = false;
  for (auto it = first; it != last; ++it) {
    merged.start = std::min(merged.start, it->first);
    merged.end = std::max(merged.end, it->second.end);
    touches_fired = touches_fired || it->second.fired;
    emitted = emitted || it->second.emitted;
  }
  if (touches_fired || merged.end <= wm) {  // late
    if (wm >= t + gap + options_.drop_after) return true;
    if (options_.late_policy == LatePolicy::kSideOutput) {
      out.side_output.push_back(r);
      return false;
    }
  }
  Pane pane{merged.end, aggregate_.initial};
  pane.emitted = emitted;
  for (auto it = first; it != last; ++it) {
    aggregate_.merge(pane.acc, it->second.acc);
    Unindex(r.key, it->first, it->second);
    --held_;
  }
  panes.erase(first, last);
  aggregate_.add(pane.acc, r);
  auto it = panes.emplace(merged.start, std::move(pane)).first;
  ++held_;
  if (merged.end <= wm) {
    Emit(r.key, merged.start, it->second, out);  // kCorrect
  } else {
    to_fire_.emplace(merged.end, r.key, merged.start);
  }
  return false;
}

template <typename Acc>
void WindowOperator<Acc>::Emit(const Key& key, absl::Time start, Pane& pane,
                               WindowOutput<Acc>& out) {
  out.results.push_back({key, Window{start, pane.end}, pane.acc, pane.emitted});
  pane.emitted = true;
  if (pane.fired) return;
  pane.fired = true;
  to_fire_.erase({pane.end, key, start});
  to_free_.emplace(FreeAt(pane), key, start);
}

template <typename Acc>
void WindowOperator<Acc>::Unindex(const Key& key, absl::Time start, const Pane& pane) {
  if (pane.fired) {
    to_free_.erase({FreeAt(pane), key, start});
  } else {
    to_fire_.erase({pane.end, key, start});
  }
}

template <typename Acc>
absl::Time WindowOperator<Acc>::FreeAt(const Pane& pane) const {
  // A session is needed while a record that is not dropped can still touch it: one up to a gap
  // before its end.
  const bool session = options_.spec.kind == WindowSpec::Kind::kSession;
  return pane.end + options_.drop_after + (session ? options_.spec.gap : absl::ZeroDuration());
}

template <typename Acc>
void WindowOperator<Acc>::Fire(WindowOutput<Acc>& out) {
  const absl::Time wm = watermark_.current();
  while (!to_fire_.empty() && std::get<0>(*to_fire_.begin()) <= wm) {
    const auto [end, key, start] = *to_fire_.begin();  // a copy: Emit erases the entry
    Emit(key, start, panes_.at(key).at(start), out);
  }
  while (!to_free_.empty() && std::get<0>(*to_free_.begin()) <= wm) {
    const auto [at, key, start] = *to_free_.begin();
    to_free_.erase(to_free_.begin());
    auto it = panes_.find(key);
    it->second.erase(start);
    --held_;
    if (it->second.empty()) panes_.erase(it);
  }
}

}  // namespace conduit::client
