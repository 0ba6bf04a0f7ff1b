#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/security/acl.h"

namespace conduit::security {

// The ACL bootstrap file: one rule per line, fields separated by spaces or tabs,
//
//   <permission> <principal> <resource-type> <pattern> <name> <operation>[,<operation>...]
//
//   # deny wins: everything under orders. except the PII topic
//   allow User:alice topic prefixed orders.    Write,Read
//   deny  *          topic literal  orders.pii Write
//   allow User:ops   cluster any    *          Alter
//
// permission: allow | deny; principal: <Type>:<name> or `*`; resource-type: topic | group |
// queue | cluster; pattern: literal | prefixed | any (whose name is `*`); operations: Read,
// Write, Create, Delete, Alter, Describe, Redrive, ViewPayload. Keywords are case-insensitive,
// names are not. A line whose first non-blank character is `#` is a comment; blank lines are
// skipped. A line with several operations gives one entry per operation, in order.

// The entries of an ACL file's text, in file order. Returns INVALID_ARGUMENT starting with
// "line N: " for the first line that is not a well-formed rule (ValidateAclEntry included).
absl::StatusOr<std::vector<AclEntry>> ParseAclFile(absl::string_view text);

// Reads and parses the file at `path`. Returns ReadTextFile's errors, or ParseAclFile's with the
// path in front.
absl::StatusOr<std::vector<AclEntry>> LoadAclFile(const std::string& path);

// Entries in the file format, one line each (FormatAclEntry); ParseAclFile reads them back.
std::string FormatAclFile(const std::vector<AclEntry>& entries);

}  // namespace conduit::security
