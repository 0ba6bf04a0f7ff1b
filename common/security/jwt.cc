#include "common/security/jwt.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/security/base64url.h"
#include "common/security/principal.h"

namespace conduit::security {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

// NumericDate values beyond this (year ~5138) are refused rather than risk overflow.
constexpr double kMaxNumericDate = 1e11;

absl::Status Unauthenticated(absl::string_view reason) {
  return absl::UnauthenticatedError(absl::StrCat("jwt ", reason));
}

// A claim value from the token, made safe and short for a message.
std::string Quote(absl::string_view untrusted) {
  constexpr size_t kMax = 64;
  std::string out = absl::CHexEscape(untrusted.substr(0, kMax));
  if (untrusted.size() > kMax) out += "...";
  return absl::StrCat("'", out, "'");
}

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime(absl::RFC3339_sec, t, absl::UTCTimeZone());
}

absl::StatusOr<Struct> DecodeJsonObject(absl::string_view segment, absl::string_view what) {
  std::optional<std::string> json = Base64UrlDecode(segment);
  if (!json) return Unauthenticated(absl::StrCat(what, " is not valid base64url"));
  Struct object;
  if (!google::protobuf::util::JsonStringToMessage(*json, &object).ok()) {
    return Unauthenticated(absl::StrCat(what, " is not a JSON object"));
  }
  return object;
}

const Value* Field(const Struct& object, const std::string& name) {
  auto it = object.fields().find(name);
  return it == object.fields().end() ? nullptr : &it->second;
}

// A NumericDate claim (RFC 7519 §2); nullopt when absent, an error when not a number.
absl::StatusOr<std::optional<absl::Time>> TimeClaim(const Struct& claims, const std::string& name) {
  const Value* value = Field(claims, name);
  if (value == nullptr) return std::optional<absl::Time>();
  if (value->kind_case() != Value::kNumberValue || !std::isfinite(value->number_value()) ||
      std::abs(value->number_value()) > kMaxNumericDate) {
    return Unauthenticated(absl::StrCat("claim '", name, "' is not a NumericDate"));
  }
  return std::optional<absl::Time>(absl::UnixEpoch() + absl::Seconds(value->number_value()));
}

absl::Status CheckAudience(const Struct& claims, const std::string& audience) {
  const Value* aud = Field(claims, "aud");
  if (aud == nullptr) return Unauthenticated("has no 'aud' claim");
  std::vector<absl::string_view> seen;
  if (aud->kind_case() == Value::kStringValue) {
    seen.push_back(aud->string_value());
  } else if (aud->kind_case() == Value::kListValue) {
    for (const Value& v : aud->list_value().values()) {
      if (v.kind_case() != Value::kStringValue) {
        return Unauthenticated("claim 'aud' holds a non-string");
      }
      seen.push_back(v.string_value());
    }
  } else {
    return Unauthenticated("claim 'aud' is neither a string nor an array");
  }
  for (absl::string_view a : seen) {
    if (a == audience) return absl::OkStatus();
  }
  return Unauthenticated(absl::StrCat(
      "audience [",
      absl::StrJoin(seen, ", ",
                    [](std::string* out, absl::string_view a) { out->append(Quote(a)); }),
      "] does not include '", audience, "'"));
}

// The expiry of a token valid at `now`: "exp" is required, "nbf" optional, both with `leeway`.
absl::StatusOr<absl::Time> CheckValidity(const Struct& claims, absl::Time now,
                                         absl::Duration leeway) {
  absl::StatusOr<std::optional<absl::Time>> exp = TimeClaim(claims, "exp");
  if (!exp.ok()) return exp.status();
  if (!exp->has_value()) return Unauthenticated("has no 'exp' claim");
  if (now >= **exp + leeway) {
    return Unauthenticated(absl::StrCat("expired at ", Rfc3339(**exp), " (leeway ",
                                        absl::FormatDuration(leeway), ")"));
  }
  absl::StatusOr<std::optional<absl::Time>> nbf = TimeClaim(claims, "nbf");
  if (!nbf.ok()) return nbf.status();
  if (nbf->has_value() && now + leeway < **nbf) {
    return Unauthenticated(absl::StrCat("is not valid before ", Rfc3339(**nbf), " (leeway ",
                                        absl::FormatDuration(leeway), ")"));
  }
  return **exp;
}

absl::StatusOr<std::string> PrincipalOf(const Struct& claims, const JwtVerifierOptions& options) {
  const Value* subject = Field(claims, options.principal_claim);
  if (subject == nullptr || subject->kind_case() != Value::kStringValue ||
      subject->string_value().empty()) {
    return Unauthenticated(
        absl::StrCat("has no non-empty string '", options.principal_claim, "' claim"));
  }
  std::string principal = absl::StrCat(options.principal_prefix, subject->string_value());
  if (absl::Status s = ValidatePrincipal(principal); !s.ok()) {
    return Unauthenticated(absl::StrCat("claim '", options.principal_claim,
                                        "' gives no valid principal: ", s.message()));
  }
  return principal;
}

}  // namespace

absl::StatusOr<std::unique_ptr<JwtVerifier>> JwtVerifier::Create(JwtVerifierOptions options,
                                                                 std::vector<JwtKeyConfig> keys,
                                                                 const time::Clock* clock) {
  if (options.issuer.empty()) return absl::InvalidArgumentError("jwt issuer is not configured");
  if (options.audience.empty()) {
    return absl::InvalidArgumentError("jwt audience is not configured");
  }
  if (options.principal_claim.empty()) {
    return absl::InvalidArgumentError("jwt principal claim is empty");
  }
  if (options.leeway < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("jwt leeway is negative");
  }
  if (keys.empty()) return absl::InvalidArgumentError("no jwt keys are configured");
  if (clock == nullptr) return absl::InvalidArgumentError("jwt verifier needs a clock");
  std::vector<Key> loaded;
  absl::flat_hash_set<std::string> ids;
  for (JwtKeyConfig& config : keys) {
    if (!ids.insert(config.key_id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("two jwt keys have the key id '", config.key_id, "'"));
    }
    absl::StatusOr<JwsPublicKey> key =
        JwsPublicKey::FromPem(config.algorithm, config.public_key_pem);
    if (!key.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("jwt key '", config.key_id, "': ", key.status().message()));
    }
    loaded.push_back(Key{std::move(config.key_id), *std::move(key)});
  }
  return std::unique_ptr<JwtVerifier>(
      new JwtVerifier(std::move(options), std::move(loaded), clock));
}

absl::StatusOr<JwtIdentity> JwtVerifier::Verify(absl::string_view token) const {
  if (token.size() > options_.max_token_bytes) {
    return Unauthenticated(
        absl::StrCat("is ", token.size(), " bytes, longer than ", options_.max_token_bytes));
  }
  const std::vector<absl::string_view> parts = absl::StrSplit(token, '.');
  if (parts.size() != 3) {
    return Unauthenticated(absl::StrCat("has ", parts.size(), " segments, expected 3"));
  }

  // The header, and the keys it may use.
  absl::StatusOr<Struct> header = DecodeJsonObject(parts[0], "header");
  if (!header.ok()) return header.status();
  const Value* alg = Field(*header, "alg");
  if (alg == nullptr || alg->kind_case() != Value::kStringValue) {
    return Unauthenticated("header has no string 'alg'");
  }
  const std::optional<JwtAlgorithm> algorithm = ParseJwtAlgorithm(alg->string_value());
  if (!algorithm) {
    return Unauthenticated(absl::StrCat("algorithm ", Quote(alg->string_value()),
                                        " is refused (accepted: EdDSA, ES256, pinned per key)"));
  }
  if (Field(*header, "crit") != nullptr) {
    return Unauthenticated("header lists critical extensions ('crit'), none are supported");
  }
  std::string kid;
  if (const Value* v = Field(*header, "kid");
      v != nullptr && v->kind_case() == Value::kStringValue) {
    kid = v->string_value();
  }
  bool kid_known = false;
  for (const Key& k : keys_) kid_known = kid_known || (!kid.empty() && k.key_id == kid);

  // The signature, before anything of the payload is believed.
  const std::optional<std::string> signature = Base64UrlDecode(parts[2]);
  if (!signature) return Unauthenticated("signature is not valid base64url");
  const absl::string_view signing_input = token.substr(0, parts[0].size() + 1 + parts[1].size());
  const Key* verified_by = nullptr;
  bool algorithm_pinned = false;
  for (const Key& k : keys_) {
    if (kid_known && k.key_id != kid) continue;
    if (k.key.algorithm() != *algorithm) continue;
    algorithm_pinned = true;
    if (k.key.Verify(signing_input, *signature)) {
      verified_by = &k;
      break;
    }
  }
  if (!algorithm_pinned) {
    return Unauthenticated(absl::StrCat(
        "algorithm '", JwtAlgorithmName(*algorithm), "' is not the pinned algorithm of ",
        kid_known ? absl::StrCat("key '", kid, "'") : std::string("any configured key")));
  }
  if (verified_by == nullptr) return Unauthenticated("signature does not verify");

  // The claims.
  absl::StatusOr<Struct> claims = DecodeJsonObject(parts[1], "payload");
  if (!claims.ok()) return claims.status();
  const Value* iss = Field(*claims, "iss");
  if (iss == nullptr || iss->kind_case() != Value::kStringValue) {
    return Unauthenticated("has no string 'iss' claim");
  }
  if (iss->string_value() != options_.issuer) {
    return Unauthenticated(absl::StrCat("issuer ", Quote(iss->string_value()),
                                        " is not the trusted issuer '", options_.issuer, "'"));
  }
  if (absl::Status s = CheckAudience(*claims, options_.audience); !s.ok()) return s;

  absl::StatusOr<absl::Time> expires_at = CheckValidity(*claims, clock_->Now(), options_.leeway);
  if (!expires_at.ok()) return expires_at.status();
  absl::StatusOr<std::string> principal = PrincipalOf(*claims, options_);
  if (!principal.ok()) return principal.status();
  return JwtIdentity{*std::move(principal), verified_by->key_id, *expires_at};
}

}  // namespace conduit::security
