#include "common/grpc/quota_metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/time/clock.h"

namespace conduit::grpc_util {
namespace {

// "name{principal,kind}" → value of every counter sample in the registry.
std::map<std::string, double> Samples(prometheus::Registry& registry) {
  std::map<std::string, double> out;
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    for (const prometheus::ClientMetric& metric : family.metric) {
      std::string principal, kind;
      for (const prometheus::ClientMetric::Label& label : metric.label) {
        if (label.name == "principal") principal = label.value;
        if (label.name == "kind") kind = label.value;
      }
      out[absl::StrCat(family.name, "{", principal, ",", kind, "}")] = metric.counter.value;
    }
  }
  return out;
}

TEST(QuotaMetrics, CountsUseAndThrottlingPerPrincipalAndKind) {
  auto registry = std::make_shared<prometheus::Registry>();
  time::FakeClock clock;
  security::QuotaBook book(security::QuotaRates{.fetch_bytes = 1000, .requests = 1}, &clock);
  book.SetObserver(std::make_shared<QuotaMetrics>(registry));
  ASSERT_TRUE(book.Charge("User:a", security::QuotaKind::kFetchBytes, 1).allowed);
  book.Debit("User:a", security::QuotaKind::kFetchBytes, 2999);
  ASSERT_FALSE(book.Charge("User:a", security::QuotaKind::kFetchBytes, 1).allowed);  // 2.001 s
  clock.Advance(absl::Seconds(1));
  ASSERT_FALSE(book.Charge("User:a", security::QuotaKind::kFetchBytes, 1).allowed);  // 1.001 s
  ASSERT_TRUE(book.Charge("User:b", security::QuotaKind::kRequests, 1).allowed);

  const std::map<std::string, double> samples = Samples(*registry);
  EXPECT_EQ(samples.at("conduit_quota_used_total{User:a,fetch_bytes}"), 3000);
  EXPECT_EQ(samples.at("conduit_quota_throttled_total{User:a,fetch_bytes}"), 2);
  EXPECT_DOUBLE_EQ(samples.at("conduit_quota_throttle_seconds_total{User:a,fetch_bytes}"), 3.002);
  EXPECT_EQ(samples.at("conduit_quota_used_total{User:b,requests}"), 1);
  EXPECT_EQ(samples.at("conduit_quota_throttled_total{User:b,requests}"), 0) << "there from 0";
  EXPECT_EQ(samples.count("conduit_quota_used_total{User:b,fetch_bytes}"), 0u);
}

TEST(QuotaMetrics, PrincipalsBeyondTheCapOfAKindAreFoldedIntoOther) {
  auto registry = std::make_shared<prometheus::Registry>();
  QuotaMetrics metrics(registry, /*max_principals=*/2);
  for (const char* p : {"User:a", "User:b", "User:c", "User:d", "User:a"}) {
    metrics.OnUsed(p, security::QuotaKind::kRequests, 1);
  }
  metrics.OnThrottled("User:e", security::QuotaKind::kRequests, absl::Milliseconds(250));
  metrics.OnUsed("User:c", security::QuotaKind::kProduceBytes, 10);  // a kind has its own cap

  const std::map<std::string, double> samples = Samples(*registry);
  EXPECT_EQ(samples.at("conduit_quota_used_total{User:a,requests}"), 2);
  EXPECT_EQ(samples.at("conduit_quota_used_total{User:b,requests}"), 1);
  EXPECT_EQ(samples.at("conduit_quota_used_total{other,requests}"), 2) << "User:c and User:d";
  EXPECT_EQ(samples.at("conduit_quota_throttled_total{other,requests}"), 1);
  EXPECT_DOUBLE_EQ(samples.at("conduit_quota_throttle_seconds_total{other,requests}"), 0.25);
  EXPECT_EQ(samples.count("conduit_quota_used_total{User:c,requests}"), 0u);
  EXPECT_EQ(samples.at("conduit_quota_used_total{User:c,produce_bytes}"), 10);
  EXPECT_EQ(samples.size(), 3u * 4) << "3 families × (a, b, other of requests; c of produce)";
}

}  // namespace
}  // namespace conduit::grpc_util
