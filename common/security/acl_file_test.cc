#include "common/security/acl_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/testing/temp_dir.h"

namespace conduit::security {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ParseAclFile, ReadsRulesCommentsAndOperationLists) {
  constexpr absl::string_view kText =
      "# deny wins: everything under orders. except the PII topic\n"
      "\n"
      "allow User:alice topic prefixed orders.  Write,Read\r\n"
      "  deny\t*   TOPIC literal orders.pii write   \n"
      "allow User:ops cluster any * Alter\n";
  absl::StatusOr<std::vector<AclEntry>> entries = ParseAclFile(kText);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 4u);
  EXPECT_EQ(FormatAclEntry((*entries)[0]), "allow User:alice topic prefixed orders. Write");
  EXPECT_EQ(FormatAclEntry((*entries)[1]), "allow User:alice topic prefixed orders. Read");
  EXPECT_EQ(FormatAclEntry((*entries)[2]), "deny * topic literal orders.pii Write");
  EXPECT_EQ(FormatAclEntry((*entries)[3]), "allow User:ops cluster any * Alter");
}

TEST(ParseAclFile, FormatRoundTrips) {
  const std::vector<AclEntry> entries = {{"User:bob", ResourceType::kQueue, PatternType::kLiteral,
                                          "emails", Operation::kViewPayload, Permission::kDeny},
                                         {"*", ResourceType::kGroup, PatternType::kAny, "*",
                                          Operation::kDescribe, Permission::kAllow}};
  absl::StatusOr<std::vector<AclEntry>> parsed = ParseAclFile(FormatAclFile(entries));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, entries);
  EXPECT_TRUE(ParseAclFile("").ok());
}

void ExpectError(absl::string_view text, absl::string_view line, absl::string_view fragment) {
  absl::StatusOr<std::vector<AclEntry>> entries = ParseAclFile(text);
  ASSERT_EQ(entries.status().code(), absl::StatusCode::kInvalidArgument) << text;
  EXPECT_THAT(std::string(entries.status().message()), StartsWith(std::string(line)));
  EXPECT_THAT(std::string(entries.status().message()), HasSubstr(std::string(fragment)));
}

TEST(ParseAclFile, ErrorsNameTheLineAndTheProblem) {
  constexpr absl::string_view kGood = "# ok\nallow User:a topic literal t Read\n";
  ExpectError(absl::StrCat(kGood, "allow User:a topic literal t\n"),
              "line 3: ", "expected 6 fields");
  ExpectError(absl::StrCat(kGood, "permit User:a topic literal t Read\n"),
              "line 3: ", "unknown permission 'permit'");
  ExpectError(absl::StrCat(kGood, "allow User:a table literal t Read\n"),
              "line 3: ", "unknown resource type 'table'");
  ExpectError(absl::StrCat(kGood, "allow User:a topic glob t* Read\n"),
              "line 3: ", "unknown pattern 'glob'");
  ExpectError(absl::StrCat(kGood, "allow User:a topic literal t Read,Wrte\n"),
              "line 3: ", "unknown operation 'Wrte' (expected one of Read, Write,");
  ExpectError(absl::StrCat(kGood, "allow User:a topic literal t Read,\n"),
              "line 3: ", "unknown operation ''");
  ExpectError(absl::StrCat(kGood, "allow alice topic literal t Read\n"),
              "line 3: ", "not of the form <Type>:<name>");
  ExpectError(absl::StrCat(kGood, "allow User:a topic any orders Read\n"),
              "line 3: ", "takes the resource name '*'");
  ExpectError(absl::StrCat(kGood, "allow User:a topic literal * Read\n"),
              "line 3: ", "needs pattern 'any'");
}

TEST(LoadAclFile, ReadsAFileAndNamesItInErrors) {
  testing::TempDir dir;
  const std::string path = dir.Sub("acls");
  std::ofstream(path) << "allow User:a topic literal t Read\nallow User:a topic literal t\n";
  absl::StatusOr<std::vector<AclEntry>> entries = LoadAclFile(path);
  EXPECT_EQ(entries.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(entries.status().message(),
              HasSubstr(absl::StrCat("acl file '", path, "' line 2: ")));

  std::ofstream(path) << "allow User:a topic literal t Read\n";
  entries = LoadAclFile(path);
  ASSERT_TRUE(entries.ok()) << entries.status();
  EXPECT_EQ(entries->size(), 1u);

  EXPECT_EQ(LoadAclFile(dir.Sub("missing")).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace conduit::security
