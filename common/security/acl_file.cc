#include "common/security/acl_file.h"

#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/security/text_file.h"

namespace conduit::security {
namespace {

constexpr size_t kFields = 6;

absl::Status LineError(size_t line, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", message));
}

absl::Status UnknownKeyword(size_t line, absl::string_view kind, absl::string_view word,
                            absl::string_view expected) {
  return LineError(line, absl::StrCat("unknown ", kind, " '", absl::CHexEscape(word),
                                      "' (expected one of ", expected, ")"));
}

// Appends the entries of one rule line to `out`.
absl::Status ParseRule(size_t line, const std::vector<absl::string_view>& fields,
                       std::vector<AclEntry>* out) {
  if (fields.size() != kFields) {
    return LineError(line, absl::StrCat("expected ", kFields,
                                        " fields (permission principal resource-type pattern "
                                        "name operations), got ",
                                        fields.size()));
  }
  AclEntry entry;
  const std::optional<Permission> permission = ParsePermission(fields[0]);
  if (!permission) return UnknownKeyword(line, "permission", fields[0], "allow, deny");
  entry.permission = *permission;
  entry.principal = std::string(fields[1]);
  const std::optional<ResourceType> type = ParseResourceType(fields[2]);
  if (!type)
    return UnknownKeyword(line, "resource type", fields[2], "topic, group, queue, cluster");
  entry.resource_type = *type;
  const std::optional<PatternType> pattern = ParsePatternType(fields[3]);
  if (!pattern) return UnknownKeyword(line, "pattern", fields[3], "literal, prefixed, any");
  entry.pattern_type = *pattern;
  entry.resource_name = std::string(fields[4]);

  for (absl::string_view name : absl::StrSplit(fields[5], ',')) {
    const std::optional<Operation> operation = ParseOperation(name);
    if (!operation) return UnknownKeyword(line, "operation", name, OperationNames());
    entry.operation = *operation;
    if (absl::Status s = ValidateAclEntry(entry); !s.ok()) return LineError(line, s.message());
    out->push_back(entry);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<AclEntry>> ParseAclFile(absl::string_view text) {
  std::vector<AclEntry> entries;
  size_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);  // also a '\r' of CRLF files
    if (line.empty() || line.front() == '#') continue;
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (absl::Status s = ParseRule(line_number, fields, &entries); !s.ok()) return s;
  }
  return entries;
}

absl::StatusOr<std::vector<AclEntry>> LoadAclFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(path, "acl file");
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<AclEntry>> entries = ParseAclFile(*text);
  if (!entries.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("acl file '", path, "' ", entries.status().message()));
  }
  return entries;
}

std::string FormatAclFile(const std::vector<AclEntry>& entries) {
  std::string text;
  for (const AclEntry& entry : entries) absl::StrAppend(&text, FormatAclEntry(entry), "\n");
  return text;
}

}  // namespace conduit::security
