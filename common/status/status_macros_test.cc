#include "common/status/status_macros.h"

#include <gtest/gtest.h>

namespace conduit {
namespace {

absl::StatusOr<int> Half(int n) {
  if (n % 2 != 0) return absl::InvalidArgumentError("odd");
  return n / 2;
}

absl::StatusOr<int> Quarter(int n) {
  CONDUIT_ASSIGN_OR_RETURN(int half, Half(n));
  CONDUIT_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

absl::Status CheckEven(int n) {
  CONDUIT_RETURN_IF_ERROR(Half(n).status());
  return absl::OkStatus();
}

TEST(StatusMacros, PropagateFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(3).message(), "odd");
}

}  // namespace
}  // namespace conduit
