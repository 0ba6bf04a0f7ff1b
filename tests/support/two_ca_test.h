#pragma once

#include <gtest/gtest.h>

#include "common/testing/temp_dir.h"
#include "tests/support/test_certs.h"

namespace conduit::testing {

// A test fixture with two independent sets of TLS material (CAs "one" and "two"), made once per
// suite by scripts/make-certs.sh and only read; SetUp fails a test whose suite could not make
// them.
class TwoCaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_dir_ = new TempDir();
    auto one = MakeTestCerts(certs_dir_->Sub("one"));
    auto two = MakeTestCerts(certs_dir_->Sub("two"));
    ASSERT_TRUE(one.ok()) << one.status();
    ASSERT_TRUE(two.ok()) << two.status();
    one_ = *one;
    two_ = *two;
  }
  static void TearDownTestSuite() {
    delete certs_dir_;
    certs_dir_ = nullptr;
  }
  void SetUp() override {
    ASSERT_FALSE(one_.ca.empty()) << "the suite's certificates were not made";
  }

  static inline TempDir* certs_dir_ = nullptr;
  static inline TestCertSet one_;
  static inline TestCertSet two_;
};

}  // namespace conduit::testing
