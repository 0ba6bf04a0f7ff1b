#pragma once

#include <cstdint>
#include <string_view>

namespace conduit::hash {

// Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2): seed 0x9747b28c, the Java
// signed-int result bit for bit.
int32_t Murmur2(std::string_view data);

// The partition Kafka's default partitioner picks for a keyed record:
// toPositive(murmur2(key)) % partitions, where toPositive clears the sign bit.
int32_t PartitionForKey(std::string_view key, int32_t partitions);

}  // namespace conduit::hash
