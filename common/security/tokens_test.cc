#include "common/security/tokens.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/testing/temp_dir.h"

namespace conduit::security {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

void Write(const std::string& path, absl::string_view text) { std::ofstream(path) << text; }

TEST(Sha256, MatchesTheKnownDigest) {
  // sha256sum of "test".
  EXPECT_EQ(Sha256Hex("test"), "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
}

TEST(TokenStore, FindsThePrincipalOfAPresentedToken) {
  TokenStore store;
  ASSERT_TRUE(store
                  .ReplaceFromText(absl::StrCat(
                      "# ci and ops\n", Sha256Hex("ci-secret"), " User:ci-bot\n\n",
                      absl::AsciiStrToUpper(Sha256Hex("ops-secret")), "\tUser:ops\r\n"))
                  .ok());
  EXPECT_EQ(store.size(), 2u);
  EXPECT_EQ(store.Lookup("ci-secret").value_or(""), "User:ci-bot");
  EXPECT_EQ(store.Lookup("ops-secret").value_or(""), "User:ops");
}

TEST(TokenStore, AnUnknownOrEmptyTokenIsUnauthenticated) {
  TokenStore store;
  EXPECT_EQ(store.Lookup("anything").status().code(), absl::StatusCode::kUnauthenticated);
  ASSERT_TRUE(store.ReplaceFromText(absl::StrCat(Sha256Hex("ci-secret"), " User:ci-bot\n")).ok());
  EXPECT_EQ(store.Lookup("ci-secret ").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(store.Lookup("ci-secre").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(store.Lookup(Sha256Hex("ci-secret")).status().code(),  // the hash is no token
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(store.Lookup("").status().code(), absl::StatusCode::kUnauthenticated);
}

TEST(TokenStore, ReloadSwapsTheWholeSet) {
  testing::TempDir dir;
  const std::string path = dir.Sub("tokens");
  Write(path, absl::StrCat(Sha256Hex("old"), " User:old\n"));
  TokenStore store;
  ASSERT_TRUE(store.Reload(path).ok());
  EXPECT_EQ(store.Lookup("old").value_or(""), "User:old");

  Write(path, absl::StrCat(Sha256Hex("new"), " User:new\n"));
  ASSERT_TRUE(store.Reload(path).ok());
  EXPECT_EQ(store.Lookup("new").value_or(""), "User:new");
  EXPECT_EQ(store.Lookup("old").status().code(), absl::StatusCode::kUnauthenticated);
}

TEST(TokenStore, AFailedReloadKeepsTheOldSet) {
  testing::TempDir dir;
  const std::string path = dir.Sub("tokens");
  Write(path, absl::StrCat(Sha256Hex("old"), " User:old\n"));
  TokenStore store;
  ASSERT_TRUE(store.Reload(path).ok());

  Write(path, absl::StrCat(Sha256Hex("new"), " User:new\n", "abc User:broken\n"));
  const absl::Status s = store.Reload(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("token file '", path, "' line 2: ")));
  EXPECT_EQ(store.Reload(dir.Sub("missing")).code(), absl::StatusCode::kNotFound);

  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.Lookup("old").value_or(""), "User:old");
  EXPECT_EQ(store.Lookup("new").status().code(), absl::StatusCode::kUnauthenticated);
}

void ExpectParseError(absl::string_view text, absl::string_view line, absl::string_view fragment) {
  absl::StatusOr<std::vector<TokenEntry>> entries = ParseTokenFile(text);
  ASSERT_EQ(entries.status().code(), absl::StatusCode::kInvalidArgument) << text;
  EXPECT_THAT(std::string(entries.status().message()), StartsWith(std::string(line)));
  EXPECT_THAT(std::string(entries.status().message()), HasSubstr(std::string(fragment)));
}

TEST(ParseTokenFile, ErrorsNameTheLineAndTheProblem) {
  const std::string a = Sha256Hex("a");
  ExpectParseError(absl::StrCat("# x\n", a, "\n"), "line 2: ", "expected 2 fields");
  ExpectParseError(absl::StrCat(a, " User:a extra\n"), "line 1: ", "expected 2 fields");
  ExpectParseError(absl::StrCat(a.substr(1), " User:a\n"), "line 1: ", "not 64 hex digits");
  ExpectParseError(absl::StrCat("z", a.substr(1), " User:a\n"), "line 1: ", "not 64 hex digits");
  ExpectParseError(absl::StrCat(a, " alice\n"), "line 1: ", "<Type>:<name>");
  ExpectParseError(absl::StrCat(a, " *\n"), "line 1: ", "<Type>:<name>");
  ExpectParseError(absl::StrCat(a, " User:a\n", absl::AsciiStrToUpper(a), " User:b\n"),
                   "line 2: ", "already on line 1");
  EXPECT_TRUE(ParseTokenFile("# only comments\n\n").ok());
}

}  // namespace
}  // namespace conduit::security
