#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

namespace conduit::bench {

// Log-linear histogram of non-negative integer values (the benchmarks record nanoseconds), in
// the spirit of HdrHistogram: values below 2·kSubBuckets are exact; above, each power of two is
// split into kSubBuckets equal buckets, so a reported quantile is within 1/kSubBuckets (~1.6%)
// of the true value. Fixed size (~30 KiB), no allocation on Record.
//
// Not thread-safe: keep one per thread and Merge them afterwards.
class LatencyHistogram {
 public:
  static constexpr int kSubBits = 6;
  static constexpr uint64_t kSubBuckets = uint64_t{1} << kSubBits;  // 64
  // The largest shift is 63 - kSubBits, so the highest index is that times kSubBuckets plus
  // 2·kSubBuckets - 1.
  static constexpr size_t kBuckets = (63 - kSubBits) * kSubBuckets + 2 * kSubBuckets;

  void Record(uint64_t value) {
    ++counts_[IndexOf(value)];
    ++count_;
    sum_ += value;
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
  }

  void Merge(const LatencyHistogram& other) {
    for (size_t i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
    count_ += other.count_;
    sum_ += other.sum_;
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
  }

  uint64_t count() const { return count_; }
  uint64_t max() const { return count_ ? max_ : 0; }
  uint64_t min() const { return count_ ? min_ : 0; }
  double mean() const { return count_ ? static_cast<double>(sum_) / count_ : 0.0; }

  // The value at quantile q in [0, 1]: the highest value equivalent to the bucket holding the
  // ceil(q·count)-th smallest sample, clamped to the observed range. 0 when empty.
  uint64_t Quantile(double q) const {
    if (count_ == 0) return 0;
    uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(count_) + 0.999999);
    rank = std::clamp<uint64_t>(rank, 1, count_);
    uint64_t seen = 0;
    for (size_t i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= rank) return std::clamp(HighestOf(i), min_, max_);
    }
    return max_;
  }

 private:
  static size_t IndexOf(uint64_t v) {
    if (v < 2 * kSubBuckets) return static_cast<size_t>(v);
    const int msb = 63 - std::countl_zero(v);
    const int shift = msb - kSubBits;  // >= 1 here
    return static_cast<size_t>(shift) * kSubBuckets + static_cast<size_t>(v >> shift);
  }

  static uint64_t HighestOf(size_t index) {
    if (index < 2 * kSubBuckets) return index;
    const size_t shift = index / kSubBuckets - 1;
    const uint64_t sub = index - shift * kSubBuckets;  // in [kSubBuckets, 2·kSubBuckets)
    return ((sub + 1) << shift) - 1;
  }

  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
};

}  // namespace conduit::bench
