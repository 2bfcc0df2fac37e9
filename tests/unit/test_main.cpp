#include <gtest/gtest.h>

#include "tern/core/log.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  tern::log::init("warn");
  return RUN_ALL_TESTS();
}
