#include "common/hash/murmur2.h"

namespace conduit::hash {

int32_t Murmur2(std::string_view data) {
  // Unsigned arithmetic gives Java's wrap-around int multiplication and >>> without UB.
  constexpr uint32_t kSeed = 0x9747b28c;
  constexpr uint32_t kM = 0x5bd1e995;
  constexpr int kR = 24;
  const auto* bytes = reinterpret_cast<const uint8_t*>(data.data());
  const uint32_t length = static_cast<uint32_t>(data.size());
  uint32_t h = kSeed ^ length;
  const uint32_t blocks = length / 4;
  for (uint32_t i = 0; i < blocks; ++i) {
    const uint8_t* b = bytes + 4 * i;
    uint32_t k = uint32_t{b[0]} | (uint32_t{b[1]} << 8) | (uint32_t{b[2]} << 16) |
                 (uint32_t{b[3]} << 24);
    k *= kM;
    k ^= k >> kR;
    k *= kM;
    h *= kM;
    h ^= k;
  }
  const uint8_t* tail = bytes + (length & ~3u);
  switch (length % 4) {
    case 3:
      h ^= uint32_t{tail[2]} << 16;
      [[fallthrough]];
    case 2:
      h ^= uint32_t{tail[1]} << 8;
      [[fallthrough]];
    case 1:
      h ^= uint32_t{tail[0]};
      h *= kM;
  }
  h ^= h >> 13;
  h *= kM;
  h ^= h >> 15;
  return static_cast<int32_t>(h);
}

int32_t PartitionForKey(std::string_view key, int32_t partitions) {
  uint32_t positive = static_cast<uint32_t>(Murmur2(key)) & 0x7fffffffu;
  return static_cast<int32_t>(positive % static_cast<uint32_t>(partitions));
}

}  // namespace conduit::hash
