#include "common/security/jwt.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/substitute.h"
#include "common/security/base64url.h"
#include "common/security/jwt_test_signer.h"
#include "common/time/clock.h"

namespace conduit::security {
namespace {

using jwt_testing::Compact;
using jwt_testing::SigningInput;
using jwt_testing::TestKeyPair;
using ::testing::HasSubstr;

constexpr int64_t kNow = 1'700'000'000;

class JwtVerifierTest : public ::testing::Test {
 protected:
  JwtVerifierTest() : clock_(absl::FromUnixSeconds(kNow)) {}

  std::unique_ptr<JwtVerifier> Verifier(JwtVerifierOptions options = {}) {
    if (options.issuer.empty()) options.issuer = "https://idp.example";
    if (options.audience.empty()) options.audience = "conduit";
    absl::StatusOr<std::unique_ptr<JwtVerifier>> v =
        JwtVerifier::Create(std::move(options),
                            {{"ed", JwtAlgorithm::kEdDSA, ed_.PublicPem()},
                             {"ec", JwtAlgorithm::kES256, ec_.PublicPem()}},
                            &clock_);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *std::move(v) : nullptr;
  }

  static std::string Claims(int64_t exp_offset = 300, absl::string_view extra = "") {
    return absl::Substitute(
        R"({"iss":"https://idp.example","aud":"conduit","sub":"alice","exp":$0$1})",
        kNow + exp_offset, extra);
  }
  static std::string Header(absl::string_view alg, absl::string_view kid) {
    return absl::Substitute(R"({"alg":"$0","typ":"JWT","kid":"$1"})", alg, kid);
  }

  std::string EdToken(absl::string_view claims, absl::string_view kid = "ed") const {
    const std::string input = SigningInput(Header("EdDSA", kid), claims);
    return Compact(input, ed_.Sign(input));
  }
  std::string EcToken(absl::string_view claims, absl::string_view kid = "ec") const {
    const std::string input = SigningInput(Header("ES256", kid), claims);
    return Compact(input, ec_.Sign(input));
  }

  void ExpectRefused(absl::string_view token, absl::string_view fragment,
                     JwtVerifierOptions options = {}) {
    absl::StatusOr<JwtIdentity> id = Verifier(std::move(options))->Verify(token);
    ASSERT_EQ(id.status().code(), absl::StatusCode::kUnauthenticated) << token;
    EXPECT_THAT(std::string(id.status().message()), HasSubstr(std::string(fragment)));
  }

  time::FakeClock clock_;
  const TestKeyPair ed_ = TestKeyPair::Ed25519();
  const TestKeyPair ec_ = TestKeyPair::P256();
};

TEST_F(JwtVerifierTest, AcceptsValidEd25519AndEs256Tokens) {
  auto verifier = Verifier();
  absl::StatusOr<JwtIdentity> ed = verifier->Verify(EdToken(Claims()));
  ASSERT_TRUE(ed.ok()) << ed.status();
  EXPECT_EQ(ed->principal, "User:alice");
  EXPECT_EQ(ed->key_id, "ed");
  EXPECT_EQ(ed->expires_at, absl::FromUnixSeconds(kNow + 300));

  absl::StatusOr<JwtIdentity> ec = verifier->Verify(EcToken(Claims()));
  ASSERT_TRUE(ec.ok()) << ec.status();
  EXPECT_EQ(ec->principal, "User:alice");
  EXPECT_EQ(ec->key_id, "ec");
}

TEST_F(JwtVerifierTest, WithoutAKnownKidEveryKeyOfTheAlgorithmIsTried) {
  auto verifier = Verifier();
  const std::string input = SigningInput(R"({"alg":"ES256"})", Claims());
  absl::StatusOr<JwtIdentity> id = verifier->Verify(Compact(input, ec_.Sign(input)));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->key_id, "ec");
  EXPECT_TRUE(verifier->Verify(EdToken(Claims(), "rotated-away")).ok());
}

TEST_F(JwtVerifierTest, AudienceMayBeAnArray) {
  const std::string claims = absl::Substitute(
      R"({"iss":"https://idp.example","aud":["other","conduit"],"sub":"bob","exp":$0})", kNow + 60);
  absl::StatusOr<JwtIdentity> id = Verifier()->Verify(EdToken(claims));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->principal, "User:bob");
}

TEST_F(JwtVerifierTest, ExpiryAndNotBeforeHonourTheLeeway) {
  auto verifier = Verifier();  // leeway 30 s
  EXPECT_TRUE(verifier->Verify(EdToken(Claims(-29))).ok());
  ExpectRefused(EdToken(Claims(-31)), "jwt expired at 2023-11-14T22:12:49+00:00 (leeway 30s)");
  EXPECT_TRUE(verifier->Verify(EdToken(Claims(300, absl::StrCat(R"(,"nbf":)", kNow + 29)))).ok());
  ExpectRefused(EdToken(Claims(300, absl::StrCat(R"(,"nbf":)", kNow + 31))),
                "jwt is not valid before 2023-11-14T22:13:51+00:00");

  // The clock, not the machine's time, decides.
  const std::string token = EdToken(Claims(60));
  EXPECT_TRUE(verifier->Verify(token).ok());
  clock_.Advance(absl::Seconds(89));
  EXPECT_TRUE(verifier->Verify(token).ok());
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(verifier->Verify(token).status().code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(JwtVerifierTest, ZeroLeewayIsExact) {
  ExpectRefused(EdToken(Claims(0)), "expired", {.leeway = absl::ZeroDuration()});
  EXPECT_TRUE(Verifier({.leeway = absl::ZeroDuration()})->Verify(EdToken(Claims(1))).ok());
}

TEST_F(JwtVerifierTest, RefusesWrongIssuerAudienceAndMissingClaims) {
  ExpectRefused(EdToken(R"({"iss":"https://evil.example","aud":"conduit","sub":"a","exp":2e9})"),
                "issuer 'https://evil.example' is not the trusted issuer");
  ExpectRefused(EdToken(R"({"iss":"https://idp.example","aud":"other","sub":"a","exp":2e9})"),
                "audience ['other'] does not include 'conduit'");
  ExpectRefused(EdToken(R"({"iss":"https://idp.example","aud":["x",7],"sub":"a","exp":2e9})"),
                "non-string");
  ExpectRefused(EdToken(R"({"iss":"https://idp.example","sub":"a","exp":2e9})"), "no 'aud'");
  ExpectRefused(EdToken(R"({"aud":"conduit","sub":"a","exp":2e9})"), "no string 'iss'");
  ExpectRefused(EdToken(R"({"iss":"https://idp.example","aud":"conduit","sub":"a"})"), "no 'exp'");
  ExpectRefused(EdToken(R"({"iss":"https://idp.example","aud":"conduit","sub":"a","exp":"soon"})"),
                "'exp' is not a NumericDate");
  ExpectRefused(EdToken(R"({"iss":"https://idp.example","aud":"conduit","exp":2e9})"),
                "no non-empty string 'sub'");
  ExpectRefused(EdToken(R"({"iss":"https://idp.example","aud":"conduit","sub":"a b","exp":2e9})"),
                "gives no valid principal: principal 'User:a b' contains whitespace");
}

TEST_F(JwtVerifierTest, ThePrincipalClaimAndPrefixAreConfigurable) {
  auto verifier = Verifier({.principal_claim = "client_id", .principal_prefix = "Service:"});
  absl::StatusOr<JwtIdentity> id = verifier->Verify(EdToken(Claims(60, R"(,"client_id":"relay")")));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->principal, "Service:relay");
}

TEST_F(JwtVerifierTest, RefusesAlgNone) {
  const std::string input = SigningInput(R"({"alg":"none","typ":"JWT"})", Claims());
  ExpectRefused(absl::StrCat(input, "."), "algorithm 'none' is refused");
  ExpectRefused(Compact(input, ed_.Sign(input)), "algorithm 'none' is refused");
}

TEST_F(JwtVerifierTest, RefusesHs256SignedWithThePublicKeyAsSecret) {
  for (const std::string& pem : {ed_.PublicPem(), ec_.PublicPem()}) {
    const std::string input = SigningInput(R"({"alg":"HS256","kid":"ed"})", Claims());
    ExpectRefused(Compact(input, jwt_testing::HmacSha256(pem, input)),
                  "algorithm 'HS256' is refused");
  }
}

TEST_F(JwtVerifierTest, TheKeysAlgorithmIsPinned) {
  // Header says ES256 and names the Ed25519 key: refused before any signature check, even
  // though the signature is a good ES256 one.
  const std::string input = SigningInput(Header("ES256", "ed"), Claims());
  ExpectRefused(Compact(input, ec_.Sign(input)),
                "algorithm 'ES256' is not the pinned algorithm of key 'ed'");
}

TEST_F(JwtVerifierTest, RefusesBadSignatures) {
  std::string token = EdToken(Claims());
  token[token.size() - 2] = token[token.size() - 2] == 'A' ? 'B' : 'A';
  ExpectRefused(token, "signature does not verify");

  const TestKeyPair stranger = TestKeyPair::Ed25519();
  const std::string input = SigningInput(Header("EdDSA", "ed"), Claims());
  ExpectRefused(Compact(input, stranger.Sign(input)), "signature does not verify");

  // A payload changed after signing (a later exp).
  const std::string signed_input = SigningInput(Header("ES256", "ec"), Claims(60));
  const std::string forged = SigningInput(Header("ES256", "ec"), Claims(86400));
  ExpectRefused(Compact(forged, ec_.Sign(signed_input)), "signature does not verify");

  // ES256 in OpenSSL's DER form instead of JWS's r || s.
  const std::string ec_input = SigningInput(Header("ES256", "ec"), Claims());
  ExpectRefused(Compact(ec_input, ec_.SignDer(ec_input)), "signature does not verify");
  ExpectRefused(absl::StrCat(ec_input, "."), "signature does not verify");
}

TEST_F(JwtVerifierTest, RefusesMalformedTokens) {
  const std::string good = EdToken(Claims());
  ExpectRefused("", "has 1 segments, expected 3");
  ExpectRefused("a.b", "has 2 segments, expected 3");
  ExpectRefused(absl::StrCat(good, ".x"), "has 4 segments, expected 3");
  ExpectRefused(std::string(9000, 'a'), "longer than 8192");

  const std::string payload = Base64UrlEncode(Claims());
  ExpectRefused(absl::StrCat("eyJhbGciOiJFZERTQSJ9=.", payload, ".AA"),
                "header is not valid base64url");
  ExpectRefused(absl::StrCat(Base64UrlEncode("{\"alg\":"), ".", payload, ".AA"),
                "header is not a JSON object");
  ExpectRefused(absl::StrCat(Base64UrlEncode("[\"EdDSA\"]"), ".", payload, ".AA"),
                "header is not a JSON object");
  ExpectRefused(absl::StrCat(Base64UrlEncode("{\"alg\":5}"), ".", payload, ".AA"),
                "header has no string 'alg'");
  ExpectRefused(absl::StrCat(Base64UrlEncode("{\"alg\":\"EdDSA\"}"), ".", payload, ".A+"),
                "signature is not valid base64url");

  // Signed, so only the payload's own form is wrong.
  const std::string bad_json =
      absl::StrCat(Base64UrlEncode(Header("EdDSA", "ed")), ".", Base64UrlEncode("{\"iss\":"));
  ExpectRefused(Compact(bad_json, ed_.Sign(bad_json)), "payload is not a JSON object");
  const std::string bad_b64 = absl::StrCat(Base64UrlEncode(Header("EdDSA", "ed")), ".e30=");
  ExpectRefused(Compact(bad_b64, ed_.Sign(bad_b64)), "payload is not valid base64url");
}

TEST_F(JwtVerifierTest, RefusesCriticalExtensions) {
  const std::string input = SigningInput(R"({"alg":"EdDSA","crit":["b64"],"b64":false})", Claims());
  ExpectRefused(Compact(input, ed_.Sign(input)), "critical extensions");
}

TEST(JwtVerifierCreate, RefusesBadConfiguration) {
  time::FakeClock clock;
  const std::string ed = TestKeyPair::Ed25519().PublicPem();
  const std::string ec = TestKeyPair::P256().PublicPem();
  const std::string p384 = [] {
    EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-384");
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_PUBKEY(bio, key);
    char* data = nullptr;
    // The length first: it sets `data` (argument order is unspecified; clang reads `data` first).
    const long size = BIO_get_mem_data(bio, &data);
    std::string pem(data, static_cast<size_t>(size));
    BIO_free(bio);
    EVP_PKEY_free(key);
    return pem;
  }();
  const JwtVerifierOptions options{.issuer = "i", .audience = "a"};
  auto create = [&](JwtVerifierOptions o, std::vector<JwtKeyConfig> keys) {
    return JwtVerifier::Create(std::move(o), std::move(keys), &clock).status();
  };
  EXPECT_TRUE(create(options, {{"k", JwtAlgorithm::kEdDSA, ed}}).ok());
  EXPECT_THAT(create(options, {{"k", JwtAlgorithm::kES256, ed}}).message(),
              HasSubstr("not an EC P-256 key"));
  EXPECT_THAT(create(options, {{"k", JwtAlgorithm::kEdDSA, ec}}).message(),
              HasSubstr("not an Ed25519 key"));
  EXPECT_THAT(create(options, {{"k", JwtAlgorithm::kES256, p384}}).message(),
              HasSubstr("not an EC P-256 key"));
  EXPECT_THAT(create(options, {{"k", JwtAlgorithm::kEdDSA, "not a pem"}}).message(),
              HasSubstr("not a PEM public key"));
  EXPECT_THAT(
      create(options, {{"k", JwtAlgorithm::kEdDSA, ed}, {"k", JwtAlgorithm::kES256, ec}}).message(),
      HasSubstr("two jwt keys have the key id 'k'"));
  EXPECT_EQ(create(options, {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create({.audience = "a"}, {{"k", JwtAlgorithm::kEdDSA, ed}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create({.issuer = "i"}, {{"k", JwtAlgorithm::kEdDSA, ed}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create({.issuer = "i", .audience = "a", .leeway = -absl::Seconds(1)},
                   {{"k", JwtAlgorithm::kEdDSA, ed}})
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace conduit::security
