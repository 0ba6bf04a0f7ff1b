#include "client/windows.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace conduit::client {

absl::Time EventTimeOf(const ConsumedRecord& r) { return r.event_time.value_or(r.append_time); }

absl::Status WindowSpec::Validate() const {
  auto positive = [](absl::Duration d, const char* what) {
    return d > absl::ZeroDuration() && d != absl::InfiniteDuration()
               ? absl::OkStatus()
               : absl::InvalidArgumentError(absl::StrCat(what, " must be positive and finite, got ",
                                                         absl::FormatDuration(d)));
  };
  switch (kind) {
    case Kind::kFixed:
      return positive(size, "window size");
    case Kind::kSliding:
      if (absl::Status s = positive(size, "window size"); !s.ok()) return s;
      if (absl::Status s = positive(slide, "window slide"); !s.ok()) return s;
      if (slide > size) {
        return absl::InvalidArgumentError(absl::StrCat("window slide ", absl::FormatDuration(slide),
                                                       " is longer than the window size ",
                                                       absl::FormatDuration(size)));
      }
      return absl::OkStatus();
    case Kind::kSession:
      return positive(gap, "session gap");
  }
  return absl::InvalidArgumentError("unknown window kind");
}

std::vector<Window> WindowSpec::WindowsOf(absl::Time t) const {
  std::vector<Window> out;
  if (kind == Kind::kSession || t == absl::InfinitePast() || t == absl::InfiniteFuture()) {
    return out;
  }
  // The latest window containing `t` starts at the slide boundary at or before it; the earlier
  // ones start a slide apart, as long as they still reach past `t`.
  const absl::Time latest = absl::UnixEpoch() + absl::Floor(t - absl::UnixEpoch(), slide);
  for (absl::Time start = latest; start + size > t; start -= slide) {
    out.push_back({start, start + size});
  }
  std::reverse(out.begin(), out.end());
  return out;
}

void Watermark::Observe(const TopicPartition& tp, absl::Time event_time,
                        std::optional<absl::Time> now) {
  PartitionMark& p = partitions_[tp];
  p.max_event_time = std::max(p.max_event_time, event_time);
  if (now) p.last_arrival = now;
  p.idle = false;
  Recompute();
}

void Watermark::MarkIdle(absl::Time now) {
  if (idle_timeout_ == absl::InfiniteDuration()) return;
  for (auto& [tp, p] : partitions_) {
    if (p.last_arrival && now - *p.last_arrival >= idle_timeout_) p.idle = true;
  }
  Recompute();
}

void Watermark::Recompute() {
  std::optional<absl::Time> least;
  for (const auto& [tp, p] : partitions_) {
    if (p.idle) continue;
    const absl::Time mark = p.max_event_time - allowed_lateness_;
    least = least ? std::min(*least, mark) : mark;
  }
  if (least) current_ = std::max(current_, *least);
}

Aggregate<int64_t> CountAggregate() {
  return {0, [](int64_t& n, const ConsumedRecord&) { ++n; },
          [](int64_t& n, const int64_t& other) { n += other; }};
}

Aggregate<int64_t> SumAggregate(std::function<int64_t(const ConsumedRecord&)> value_of) {
  return {0,
          [value_of = std::move(value_of)](int64_t& sum, const ConsumedRecord& r) {
            sum += value_of(r);
          },
          [](int64_t& sum, const int64_t& other) { sum += other; }};
}

}  // namespace conduit::client
