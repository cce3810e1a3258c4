#include "tally/common/memory.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

namespace tally {
namespace {

TEST(Memory, TheResidentSetGrowsWithPagesTouched) {
  const std::size_t before = residentBytes();
  ASSERT_GT(before, 0u) << "/proc/self/statm is readable here";
  constexpr std::size_t kTouched = 64 << 20;
  auto block = std::make_unique<char[]>(kTouched);
  std::memset(block.get(), 1, kTouched);
  EXPECT_GE(residentBytes(), before + kTouched / 2);
}

// Many small blocks, freed but for one in each page: glibc keeps such pages
// (no trim at the top can return them) until asked.
TEST(Memory, FreedSmallBlocksAreReturnedWhenReleased) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer's allocator is not glibc's";
#endif
  std::vector<char*> blocks;
  for (int i = 0; i < 200'000; ++i) {
    auto* b = static_cast<char*>(std::malloc(480));
    std::memset(b, 1, 480);
    blocks.push_back(b);
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (i % 64 != 0) std::free(blocks[i]);
  }
  const std::size_t held = residentBytes();
  const bool released = releaseFreeMemory();
  const std::size_t after = residentBytes();
  for (std::size_t i = 0; i < blocks.size(); i += 64) std::free(blocks[i]);
#if defined(__GLIBC__)
  EXPECT_TRUE(released);
  EXPECT_LT(after + (40u << 20), held) << "about 95 MB were free in pages the allocator kept";
#else
  EXPECT_FALSE(released);
#endif
}

}  // namespace
}  // namespace tally
