#include "common/security/base64url.h"

#include <gtest/gtest.h>

namespace conduit::security {
namespace {

TEST(Base64Url, EncodesRfc4648VectorsWithoutPadding) {
  EXPECT_EQ(Base64UrlEncode(""), "");
  EXPECT_EQ(Base64UrlEncode("f"), "Zg");
  EXPECT_EQ(Base64UrlEncode("fo"), "Zm8");
  EXPECT_EQ(Base64UrlEncode("foo"), "Zm9v");
  EXPECT_EQ(Base64UrlEncode("foob"), "Zm9vYg");
  EXPECT_EQ(Base64UrlEncode("fooba"), "Zm9vYmE");
  EXPECT_EQ(Base64UrlEncode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64UrlEncode("\xfb\xff\xbf"), "-_-_");  // the url-safe characters
}

TEST(Base64Url, DecodesWhatItEncodes) {
  std::string data;
  for (int n = 0; n < 300; ++n) {
    std::optional<std::string> decoded = Base64UrlDecode(Base64UrlEncode(data));
    ASSERT_TRUE(decoded.has_value()) << n;
    EXPECT_EQ(*decoded, data);
    data.push_back(static_cast<char>(n * 37 + 11));
  }
}

TEST(Base64Url, RefusesNonCanonicalText) {
  EXPECT_EQ(Base64UrlDecode("Zg=="), std::nullopt);  // padding
  EXPECT_EQ(Base64UrlDecode("Z"), std::nullopt);     // a lone character is 6 bits
  EXPECT_EQ(Base64UrlDecode("Zm9vYmFyZ"), std::nullopt);
  EXPECT_EQ(Base64UrlDecode("Zh"), std::nullopt);    // leftover bits not zero
  EXPECT_EQ(Base64UrlDecode("++//"), std::nullopt);  // standard alphabet
  EXPECT_EQ(Base64UrlDecode("Zm9 v"), std::nullopt);
  EXPECT_EQ(Base64UrlDecode(absl::string_view("Zm\0v", 4)), std::nullopt);
  EXPECT_EQ(Base64UrlDecode(""), std::string());
}

}  // namespace
}  // namespace conduit::security
