#include "common/security/principal_rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace conduit::security {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

CertificatePrincipalRules Rules(absl::string_view spec) {
  absl::StatusOr<CertificatePrincipalRules> rules = CertificatePrincipalRules::Parse(spec);
  EXPECT_TRUE(rules.ok()) << rules.status();
  return rules.ok() ? *std::move(rules) : CertificatePrincipalRules();
}

const CertificateNames kBroker = {
    .uris = {"spiffe://conduit.dev/ns/prod/sa/broker"},
    .dns = {"broker-0.conduit.svc", "broker.internal"},
    .common_name = "Broker-0.OPS",
};

TEST(CertificatePrincipalRules, MapsASpiffeIdThroughAUriRule) {
  const CertificatePrincipalRules rules = Rules(R"(URI:^spiffe://conduit\.dev/(.*)$/svc-\1/)");
  EXPECT_EQ(rules.Map(kBroker), "User:svc-ns/prod/sa/broker");
  // Another trust domain: the rule does not apply, and there is no other rule.
  EXPECT_EQ(rules.Map({.uris = {"spiffe://evil.dev/ns/prod/sa/broker"}}), "");
}

TEST(CertificatePrincipalRules, TheRegexMustMatchTheWholeField) {
  const CertificatePrincipalRules rules = Rules(R"(DNS:broker/b/, CN:broker-0/b0/L)");
  EXPECT_EQ(rules.Map(kBroker), "");
  EXPECT_EQ(rules.Map({.dns = {"broker"}}), "User:b");
}

TEST(CertificatePrincipalRules, CommonNameRuleChangesCase) {
  EXPECT_EQ(Rules(R"(CN:^(.*)\.ops$/\1/L)").Map({.common_name = "Alice.ops"}), "User:alice");
  EXPECT_EQ(Rules(R"(CN:(?i)^(.*)\.ops$/\1/L)").Map({.common_name = "Alice.OPS"}), "User:alice");
  EXPECT_EQ(Rules(R"(CN:(.*)/team-\1/U)").Map({.common_name = "ops"}), "User:TEAM-OPS");
  EXPECT_EQ(Rules(R"(CN:(.*)/\1/)").Map({.common_name = "MiXed"}), "User:MiXed");
}

TEST(CertificatePrincipalRules, DnsRuleTriesEverySanInOrder) {
  const CertificatePrincipalRules rules = Rules(R"(DNS:^(.*)\.internal$/\1/)");
  EXPECT_EQ(rules.Map(kBroker), "User:broker");
  EXPECT_EQ(Rules(R"(DNS:(.*)/\1/)").Map(kBroker), "User:broker-0.conduit.svc");
}

TEST(CertificatePrincipalRules, TheFirstRuleThatAppliesWins) {
  const CertificatePrincipalRules rules = Rules(
      "URI:^spiffe://other\\.dev/(.*)$/other-\\1/\n"
      "CN:^(.*)\\.OPS$/ops-\\1/L\n"
      "DNS:(.*)/\\1/\n");
  EXPECT_EQ(rules.Map(kBroker), "User:ops-broker-0");
  EXPECT_EQ(rules.Map({.uris = {"spiffe://other.dev/x"}, .common_name = "a.OPS"}), "User:other-x");
  EXPECT_EQ(rules.Map({.dns = {"d.example"}, .common_name = "no-suffix"}), "User:d.example");
}

TEST(CertificatePrincipalRules, DefaultIsUriThenDnsThenCommonName) {
  for (const CertificatePrincipalRules& rules :
       {CertificatePrincipalRules(), Rules(""), Rules(" \n , \n,,"), Rules("DEFAULT")}) {
    EXPECT_EQ(rules.Map(kBroker), "User:spiffe://conduit.dev/ns/prod/sa/broker");
    EXPECT_EQ(rules.Map({.dns = {"a.example", "b.example"}, .common_name = "c"}), "User:a.example");
    EXPECT_EQ(rules.Map({.common_name = "c"}), "User:c");
    EXPECT_EQ(rules.Map({}), "");
  }
}

TEST(CertificatePrincipalRules, DefaultAfterRulesIsTheFallback) {
  const CertificatePrincipalRules rules = Rules(R"(CN:^(.*)\.ops$/\1/L,DEFAULT)");
  EXPECT_EQ(rules.Map({.dns = {"x.example"}, .common_name = "alice.ops"}), "User:alice");
  EXPECT_EQ(rules.Map({.dns = {"x.example"}, .common_name = "alice"}), "User:x.example");
}

TEST(CertificatePrincipalRules, AnEmptyOrInvalidResultDoesNotApply) {
  // `\1` is empty for "x": the rule produces nothing and the next one is tried.
  EXPECT_EQ(Rules(R"(CN:^(a*)x$/\1/, DEFAULT)").Map({.common_name = "x"}), "User:x");
  EXPECT_EQ(Rules(R"(CN:^(a*)x$/\1/)").Map({.common_name = "x"}), "");
  // A name with whitespace is no principal name, from a rule or from DEFAULT.
  EXPECT_EQ(Rules(R"(CN:(.*)/\1/, DNS:(.*)/\1/)").Map({.dns = {"d"}, .common_name = "John Doe"}),
            "User:d");
  EXPECT_EQ(CertificatePrincipalRules().Map({.common_name = "John Doe"}), "");
  // An invalid result on one SAN does not stop the rule trying the next.
  EXPECT_EQ(Rules(R"(URI:urn:(.*)/\1/)").Map({.uris = {"urn:a b", "urn:ab"}}), "User:ab");
  // Too long.
  EXPECT_EQ(Rules(R"(CN:(.*)/\1/)").Map({.common_name = std::string(600, 'a')}), "");
}

TEST(CertificatePrincipalRules, CommasInsideARegexDoNotSeparateRules) {
  const CertificatePrincipalRules rules =
      Rules(R"(CN:^host-([0-9]{1,3})$/h\1/, CN:^([a,b]+)$/ab-\1/ ,DEFAULT)");
  EXPECT_EQ(rules.Map({.common_name = "host-42"}), "User:h42");
  EXPECT_EQ(rules.Map({.common_name = "a,b"}), "User:ab-a,b");
  EXPECT_EQ(rules.Map({.common_name = "host-4242"}), "User:host-4242");
}

void ExpectError(absl::string_view spec, absl::string_view rule, absl::string_view fragment) {
  absl::StatusOr<CertificatePrincipalRules> rules = CertificatePrincipalRules::Parse(spec);
  ASSERT_EQ(rules.status().code(), absl::StatusCode::kInvalidArgument) << spec;
  EXPECT_THAT(std::string(rules.status().message()), StartsWith(std::string(rule))) << spec;
  EXPECT_THAT(std::string(rules.status().message()), HasSubstr(std::string(fragment))) << spec;
}

TEST(CertificatePrincipalRules, ParseErrorsNameTheRuleAndTheProblem) {
  ExpectError("DEFAULT, RULE:(.*)/\\1/",
              "principal mapping rule 2 'RULE:(.*)/\\\\1/': ", "unknown kind 'RULE'");
  ExpectError("uri:(.*)/\\1/", "principal mapping rule 1 ", "unknown kind 'uri'");
  ExpectError("DEFAULT\nDEFAULTS", "principal mapping rule 2 'DEFAULTS': ", "expected URI:");
  ExpectError("CN:(.*)", "principal mapping rule 1 ", "expected <regex>/<replacement>/");
  ExpectError("CN:(.*)/x", "principal mapping rule 1 ", "'x' after the last '/'");
  ExpectError("CN:(.*)/x/Q", "principal mapping rule 1 ", "'Q' after the last '/'");
  ExpectError("CN:(.*)/", "principal mapping rule 1 ", "missing the '/' between");
  ExpectError("CN:/x/", "principal mapping rule 1 ", "the regex is empty");
  ExpectError("CN:(.*)//", "principal mapping rule 1 ", "the replacement is empty");
  ExpectError("DEFAULT\n\nCN:(a/b/", "principal mapping rule 2 ", "the regex does not compile");
  ExpectError("CN:(.*)/\\2/", "principal mapping rule 1 ", "bad replacement");
  ExpectError("CN:(.*)/a\\b/", "principal mapping rule 1 ", "bad replacement");
  // A missing closing '/' before a comma: the next rule still starts at the comma.
  ExpectError("CN:(.*)/\\1, DNS:(.*)/\\1/", "principal mapping rule 1 ", "after the last '/'");
}

}  // namespace
}  // namespace conduit::security
