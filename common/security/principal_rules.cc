#include "common/security/principal_rules.h"

#include <re2/re2.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/security/principal.h"

namespace conduit::security {
namespace {

constexpr absl::string_view kPrincipalType = "User:";
constexpr absl::string_view kDefault = "DEFAULT";

re2::StringPiece Piece(absl::string_view s) { return re2::StringPiece(s.data(), s.size()); }

// Whether `text` begins with DEFAULT as a whole word.
bool StartsWithDefault(absl::string_view text) {
  if (!absl::StartsWith(text, kDefault)) return false;
  text.remove_prefix(kDefault.size());
  return text.empty() || text[0] == ',' || absl::ascii_isspace(static_cast<unsigned char>(text[0]));
}

// Whether `text`, the rule read so far, is complete: DEFAULT, or ending in '/', "/L" or "/U"
// (or blank: a blank entry).
bool EndsRule(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  return text.empty() || text == kDefault || absl::EndsWith(text, "/") ||
         absl::EndsWith(text, "/L") || absl::EndsWith(text, "/U");
}

// Whether `text`, what follows a comma, begins a rule.
bool StartsRule(absl::string_view text) {
  text = absl::StripLeadingAsciiWhitespace(text);
  return absl::StartsWith(text, "URI:") || absl::StartsWith(text, "DNS:") ||
         absl::StartsWith(text, "CN:") || StartsWithDefault(text);
}

// The rules of `spec`, whitespace-trimmed and without blank entries (separators: see the
// header).
std::vector<absl::string_view> SplitRules(absl::string_view spec) {
  std::vector<absl::string_view> rules;
  size_t start = 0;
  auto take = [&](size_t end) {
    absl::string_view rule = absl::StripAsciiWhitespace(spec.substr(start, end - start));
    if (!rule.empty()) rules.push_back(rule);
    start = end + 1;
  };
  for (size_t i = 0; i < spec.size(); ++i) {
    if (spec[i] == '\n') {
      take(i);
    } else if (spec[i] == ',' &&
               (EndsRule(spec.substr(start, i - start)) || StartsRule(spec.substr(i + 1)))) {
      take(i);
    }
  }
  take(spec.size());
  return rules;
}

bool IsValidName(absl::string_view name) {
  return !name.empty() && ValidatePrincipal(absl::StrCat(kPrincipalType, name)).ok();
}

}  // namespace

CertificatePrincipalRules::CertificatePrincipalRules() : rules_{Rule{}} {}

absl::StatusOr<CertificatePrincipalRules> CertificatePrincipalRules::Parse(absl::string_view spec) {
  std::vector<Rule> rules;
  const std::vector<absl::string_view> texts = SplitRules(spec);
  for (size_t i = 0; i < texts.size(); ++i) {
    absl::StatusOr<Rule> rule = ParseRule(i + 1, texts[i]);
    if (!rule.ok()) return rule.status();
    rules.push_back(*std::move(rule));
  }
  if (rules.empty()) return CertificatePrincipalRules();
  return CertificatePrincipalRules(std::move(rules));
}

absl::StatusOr<CertificatePrincipalRules::Rule> CertificatePrincipalRules::ParseRule(
    size_t number, absl::string_view text) {
  auto error = [&](absl::string_view problem) {
    return absl::InvalidArgumentError(absl::StrCat("principal mapping rule ", number, " '",
                                                   absl::CHexEscape(text), "': ", problem));
  };
  Rule rule;
  if (text == kDefault) return rule;
  const size_t colon = text.find(':');
  const absl::string_view kind = text.substr(0, colon);
  if (colon == absl::string_view::npos) {
    return error("expected URI:, DNS: or CN: and <regex>/<replacement>/, or DEFAULT");
  }
  if (kind == "URI") {
    rule.kind = Kind::kUri;
  } else if (kind == "DNS") {
    rule.kind = Kind::kDns;
  } else if (kind == "CN") {
    rule.kind = Kind::kCommonName;
  } else {
    return error(absl::StrCat("unknown kind '", absl::CHexEscape(kind),
                              "' (expected URI:, DNS:, CN: or DEFAULT)"));
  }
  const absl::string_view body = text.substr(colon + 1);
  const size_t last = body.rfind('/');
  if (last == absl::string_view::npos) {
    return error("expected <regex>/<replacement>/ with an optional L or U");
  }
  const absl::string_view suffix = body.substr(last + 1);
  if (suffix == "L") {
    rule.letter_case = LetterCase::kLower;
  } else if (suffix == "U") {
    rule.letter_case = LetterCase::kUpper;
  } else if (!suffix.empty()) {
    return error(absl::StrCat("'", absl::CHexEscape(suffix),
                              "' after the last '/' (expected nothing, L or U; is the closing "
                              "'/' missing?)"));
  }
  const size_t middle = last == 0 ? absl::string_view::npos : body.rfind('/', last - 1);
  if (middle == absl::string_view::npos) {
    return error("missing the '/' between the regex and the replacement");
  }
  const absl::string_view regex = body.substr(0, middle);
  rule.replacement = std::string(body.substr(middle + 1, last - middle - 1));
  if (regex.empty()) return error("the regex is empty");
  if (rule.replacement.empty()) return error("the replacement is empty");

  re2::RE2::Options options;
  options.set_log_errors(false);
  auto compiled = std::make_shared<const re2::RE2>(Piece(regex), options);
  if (!compiled->ok()) {
    return error(absl::StrCat("the regex does not compile: ", compiled->error()));
  }
  std::string rewrite_error;
  if (!compiled->CheckRewriteString(rule.replacement, &rewrite_error)) {
    return error(absl::StrCat("bad replacement: ", rewrite_error));
  }
  rule.submatches = 1 + re2::RE2::MaxSubmatch(rule.replacement);
  rule.regex = std::move(compiled);
  return rule;
}

std::string CertificatePrincipalRules::Apply(const Rule& rule, const CertificateNames& names) {
  if (rule.kind == Kind::kDefault) {
    std::string name = !names.uris.empty()  ? names.uris.front()
                       : !names.dns.empty() ? names.dns.front()
                                            : names.common_name;
    return IsValidName(name) ? name : "";
  }
  std::vector<absl::string_view> fields;
  switch (rule.kind) {
    case Kind::kUri:
      fields.assign(names.uris.begin(), names.uris.end());
      break;
    case Kind::kDns:
      fields.assign(names.dns.begin(), names.dns.end());
      break;
    case Kind::kCommonName:
      if (!names.common_name.empty()) fields.push_back(names.common_name);
      break;
    case Kind::kDefault:
      break;
  }
  // \0..\9: at most ten entries.
  re2::StringPiece groups[10];
  for (absl::string_view field : fields) {
    if (!rule.regex->Match(Piece(field), 0, field.size(), re2::RE2::ANCHOR_BOTH, groups,
                           rule.submatches)) {
      continue;
    }
    std::string name;
    if (!rule.regex->Rewrite(&name, rule.replacement, groups, rule.submatches)) continue;
    if (rule.letter_case == LetterCase::kLower) absl::AsciiStrToLower(&name);
    if (rule.letter_case == LetterCase::kUpper) absl::AsciiStrToUpper(&name);
    if (IsValidName(name)) return name;
  }
  return "";
}

std::string CertificatePrincipalRules::Map(const CertificateNames& names) const {
  for (const Rule& rule : rules_) {
    std::string name = Apply(rule, names);
    if (!name.empty()) return absl::StrCat(kPrincipalType, name);
  }
  return "";
}

}  // namespace conduit::security
