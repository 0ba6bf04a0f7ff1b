#include "common/hash/murmur2.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace conduit::hash {
namespace {

// testdata/kafka_murmur2.tsv holds Kafka's own murmur2 vectors and the partitions Kafka's
// default partitioner derives from them.
TEST(Murmur2, MatchesKafkaVectorsAndPartitions) {
  const char* root = std::getenv("CONDUIT_SOURCE_DIR");
  ASSERT_NE(root, nullptr) << "CONDUIT_SOURCE_DIR is set by CTest";
  std::ifstream in(std::string(root) + "/testdata/kafka_murmur2.tsv");
  ASSERT_TRUE(in.is_open());
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string key;
    int64_t hash;
    int p3, p12, p100;
    ASSERT_TRUE(std::getline(fields, key, '\t') && (fields >> hash >> p3 >> p12 >> p100)) << line;
    EXPECT_EQ(Murmur2(key), hash) << key;
    EXPECT_EQ(PartitionForKey(key, 3), p3) << key;
    EXPECT_EQ(PartitionForKey(key, 12), p12) << key;
    EXPECT_EQ(PartitionForKey(key, 100), p100) << key;
    ++checked;
  }
  EXPECT_GE(checked, 11);
}

TEST(Murmur2, BinaryKeysAndEmptyKey) {
  // Bytes >= 0x80 must be treated as unsigned, as Kafka's (b & 0xff) does.
  std::string binary("\xff\xfe\x80\x01\x7f", 5);
  int32_t p = PartitionForKey(binary, 7);
  EXPECT_GE(p, 0);
  EXPECT_LT(p, 7);
  EXPECT_EQ(PartitionForKey("", 1), 0);
  EXPECT_EQ(Murmur2(""), Murmur2(std::string()));
}

}  // namespace
}  // namespace conduit::hash
