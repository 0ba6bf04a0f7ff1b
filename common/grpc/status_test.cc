#include "common/grpc/status.h"

#include <gtest/gtest.h>

namespace conduit::grpc_util {
namespace {

TEST(StatusMapping, EveryCanonicalCodeRoundTripsWithItsMessage) {
  for (int code = 0; code <= 16; ++code) {
    absl::Status in(static_cast<absl::StatusCode>(code), code == 0 ? "" : "topic 'x' is odd");
    grpc::Status out = ToGrpcStatus(in);
    EXPECT_EQ(static_cast<int>(out.error_code()), code);
    EXPECT_EQ(out.error_message(), std::string(in.message()));
    EXPECT_EQ(FromGrpcStatus(out), in);
  }
  EXPECT_EQ(ToGrpcStatus(absl::NotFoundError("x")).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ToGrpcStatus(absl::ResourceExhaustedError("x")).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
}

}  // namespace
}  // namespace conduit::grpc_util
