#include "common/ids/strong_id.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"

namespace conduit::ids {
namespace {

struct ATag {};
struct BTag {};
using A = StrongId<ATag, int64_t>;
using B = StrongId<BTag, int64_t>;
using Token = StrongId<struct TokenTag, std::string>;

// What the type is for: the mix-ups do not compile.
static_assert(!std::is_convertible_v<int64_t, A>, "a bare integer is not an id");
static_assert(!std::is_convertible_v<A, int64_t>, "an id is not a bare integer");
static_assert(!std::is_constructible_v<A, B>, "one kind of id is not another");
static_assert(!std::is_convertible_v<std::string, Token>, "a string is not a token");
static_assert(std::is_constructible_v<A, int64_t>, "explicit construction is the way in");

TEST(StrongId, ComparesHashesAndPrintsAsItsValue) {
  EXPECT_EQ(A(3), A(3));
  EXPECT_LT(A(3), A(4));
  EXPECT_EQ(A().value(), 0);
  absl::flat_hash_set<A> set{A(1), A(2), A(1)};
  EXPECT_EQ(set.size(), 2u);
  std::ostringstream out;
  out << Token("t-1");
  EXPECT_EQ(out.str(), "t-1");
  Token moved = Token("abc");
  EXPECT_EQ(std::move(moved).value(), "abc");
  EXPECT_EQ(absl::StrFormat("%d/%s", A(3), Token("t")), "3/t");
}

}  // namespace
}  // namespace conduit::ids
