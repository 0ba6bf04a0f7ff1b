#pragma once

#include <compare>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace conduit::ids {

// A value type for an id or counter that is easy to mix up with another of the same
// representation: a lease token and a queue name (both strings), a partition and a sequence
// number (both int32), a member epoch and a group epoch. Construction is explicit and there is
// no conversion back except value(), so passing one where the other is expected does not
// compile. Ordered, hashable (absl and std), printable (streams, absl::StrFormat); no arithmetic (a
// counter that needs it says so with value()).
//
//   struct LeaseTokenTag {};
//   using LeaseToken = StrongId<LeaseTokenTag, std::string>;
template <typename Tag, typename T>
class StrongId {
 public:
  using ValueType = T;

  constexpr StrongId() = default;
  constexpr explicit StrongId(T value) : value_(std::move(value)) {}

  constexpr const T& value() const& { return value_; }
  T&& value() && { return std::move(value_); }

  friend constexpr auto operator<=>(const StrongId&, const StrongId&) = default;
  friend constexpr bool operator==(const StrongId&, const StrongId&) = default;

  template <typename H>
  friend H AbslHashValue(H h, const StrongId& id) {
    return H::combine(std::move(h), id.value_);
  }
  friend std::ostream& operator<<(std::ostream& out, const StrongId& id) {
    return out << id.value_;
  }
  // absl::StrFormat prints the value: %d for an integral id, %s for a string one. Another
  // conversion (%x, %u) does not compile; a width or a flag is ignored.
  friend absl::FormatConvertResult<std::is_integral_v<T> ? absl::FormatConversionCharSet::d
                                                         : absl::FormatConversionCharSet::s>
  AbslFormatConvert(const StrongId& id, const absl::FormatConversionSpec&, absl::FormatSink* sink) {
    if constexpr (std::is_integral_v<T>) {
      sink->Append(absl::StrCat(id.value_));
    } else {
      sink->Append(id.value_);
    }
    return {true};
  }

 private:
  T value_{};
};

}  // namespace conduit::ids

template <typename Tag, typename T>
struct std::hash<conduit::ids::StrongId<Tag, T>> {
  size_t operator()(const conduit::ids::StrongId<Tag, T>& id) const {
    return std::hash<T>()(id.value());
  }
};
