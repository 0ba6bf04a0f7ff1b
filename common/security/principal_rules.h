#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace re2 {
class RE2;
}  // namespace re2

namespace conduit::security {

// The names a TLS client certificate carries, as the transport reports them.
struct CertificateNames {
  // URI SANs in certificate order; the SPIFFE id is one of them (list it first: DEFAULT takes
  // the first).
  std::vector<std::string> uris;
  std::vector<std::string> dns;  // DNS SANs in certificate order
  std::string common_name;       // the subject CN; empty when it has none
};

// Maps a client certificate to a principal through ordered rules, like Kafka's
// ssl.principal.mapping.rules. A spec lists rules separated by newlines or commas:
//
//   URI:<regex>/<replacement>/[L|U]   tried on each URI SAN in order
//   DNS:<regex>/<replacement>/[L|U]   tried on each DNS SAN in order
//   CN:<regex>/<replacement>/[L|U]    tried on the common name
//   DEFAULT                           the first URI SAN, else the first DNS SAN, else the CN
//
// e.g. `URI:^spiffe://conduit\.dev/ns/prod/sa/(.*)$/\1/, CN:^(.*)\.ops$/\1/L, DEFAULT`.
//
// - A rule's body is split at its last two '/': the regex may contain '/' (SPIFFE ids do), the
//   replacement may not. After the last '/' comes nothing, `L` (lowercase the result) or `U`
//   (uppercase; ASCII letters only).
// - The regex is RE2 and must match the whole field (it is anchored at both ends; `^`/`$` are
//   allowed and change nothing). The replacement is RE2::Rewrite's: `\1`..`\9` insert groups,
//   `\0` the whole field, `\\` a backslash.
// - A comma separates rules only where one ends (after its closing `/`, `/L`, `/U` or after
//   `DEFAULT`) or one starts (before `URI:`, `DNS:`, `CN:` or `DEFAULT`); spaces may surround
//   it. Other commas belong to the regex (`[0-9]{1,3}`, `[a,b]`); a regex that needs a literal
//   comma before such a keyword writes it `[,]`. Blank entries are ignored.
// - Kinds are upper case, as in Kafka. A spec without rules means DEFAULT alone.
//
// The first rule that produces a name wins; the principal is "User:<name>". A rule produces
// nothing when its regex matches no field of its kind, or when its result is empty or not a
// valid principal name (ValidatePrincipal of "User:<name>": whitespace, control bytes, too
// long); the next rule is tried then. When no rule produces a name, the certificate yields no
// principal: the caller is treated as if it presented no certificate (anonymous, or refused
// where anonymous callers are).
//
// Immutable after Parse; Map is safe on any number of threads. Copies share the compiled
// regexes.
class CertificatePrincipalRules {
 public:
  // DEFAULT alone: the mapping without configured rules.
  CertificatePrincipalRules();

  // Returns the rules of `spec`, or INVALID_ARGUMENT naming the rule by number and quoting it,
  // and the problem: an unknown kind, a missing '/', something other than L or U after the
  // last '/', an empty regex or replacement, a regex RE2 does not compile, or a replacement
  // that RE2 rejects (a `\N` beyond the regex's groups, a `\` before anything but a digit or
  // `\`).
  static absl::StatusOr<CertificatePrincipalRules> Parse(absl::string_view spec);

  // "User:<name>" from the first rule that produces a name; "" when none does.
  std::string Map(const CertificateNames& names) const;

 private:
  enum class Kind { kDefault, kUri, kDns, kCommonName };
  enum class LetterCase { kKeep, kLower, kUpper };
  struct Rule {
    Kind kind = Kind::kDefault;
    std::shared_ptr<const re2::RE2> regex;  // null for DEFAULT
    std::string replacement;
    int submatches = 0;  // entries Rewrite needs: 1 + the highest \N the replacement uses
    LetterCase letter_case = LetterCase::kKeep;
  };

  explicit CertificatePrincipalRules(std::vector<Rule> rules) : rules_(std::move(rules)) {}

  static absl::StatusOr<Rule> ParseRule(size_t number, absl::string_view text);
  // The name `rule` makes of `names`; empty when it produces none.
  static std::string Apply(const Rule& rule, const CertificateNames& names);

  std::vector<Rule> rules_;
};

}  // namespace conduit::security
