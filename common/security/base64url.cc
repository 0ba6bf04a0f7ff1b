#include "common/security/base64url.h"

#include <array>
#include <cstdint>

namespace conduit::security {
namespace {

constexpr absl::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
static_assert(kAlphabet.size() == 64);

constexpr int8_t kInvalid = -1;

constexpr std::array<int8_t, 256> MakeDecodeTable() {
  std::array<int8_t, 256> table{};
  for (auto& v : table) v = kInvalid;
  for (size_t i = 0; i < kAlphabet.size(); ++i) {
    table[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
  }
  return table;
}

constexpr std::array<int8_t, 256> kDecode = MakeDecodeTable();

}  // namespace

std::string Base64UrlEncode(absl::string_view data) {
  std::string out;
  out.reserve((data.size() * 4 + 2) / 3);
  uint32_t bits = 0;
  int count = 0;  // bits held in `bits`
  for (unsigned char c : data) {
    bits = (bits << 8) | c;
    count += 8;
    while (count >= 6) {
      count -= 6;
      out.push_back(kAlphabet[(bits >> count) & 0x3f]);
    }
  }
  if (count > 0) out.push_back(kAlphabet[(bits << (6 - count)) & 0x3f]);
  return out;
}

std::optional<std::string> Base64UrlDecode(absl::string_view text) {
  if (text.size() % 4 == 1) return std::nullopt;  // 6 bits cannot make a byte
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t bits = 0;
  int count = 0;
  for (char c : text) {
    const int8_t v = kDecode[static_cast<unsigned char>(c)];
    if (v == kInvalid) return std::nullopt;
    bits = (bits << 6) | static_cast<uint32_t>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xff));
    }
  }
  // The 2 or 4 bits that pad the last character must be zero.
  if ((bits & ((1u << count) - 1)) != 0) return std::nullopt;
  return out;
}

}  // namespace conduit::security
