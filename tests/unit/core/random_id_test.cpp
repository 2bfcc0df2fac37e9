#include "tern/core/random_id.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace tern {
namespace {

TEST(RandomId, HexOfTheRequestedLengthAndNeverRepeated) {
  std::set<std::string> seen;
  for (size_t bytes : {1u, 12u, 255u, 256u, 257u, 600u}) {  // across getentropy's 256-byte calls
    const std::string id = random_hex(bytes);
    ASSERT_EQ(id.size(), 2 * bytes);
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    if (bytes >= 12) EXPECT_TRUE(seen.insert(id.substr(0, 24)).second) << "repeated prefix";
  }
  // A long id is not one repeated 256-byte block.
  const std::string big = random_hex(600);
  EXPECT_NE(big.substr(0, 512), big.substr(512, 512));
}

}  // namespace
}  // namespace tern
