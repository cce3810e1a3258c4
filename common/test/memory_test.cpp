#include "tally/common/memory.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace tally {
namespace {

constexpr const char* kReportVariable = "TALLY_TEST_HUGE_PAGE_REPORT";

// "AnonHugePages" of /proc/self/smaps_rollup, in kB.
long anonHugeKb() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string key;
  long kb = 0;
  while (in >> key) {
    if (key == "AnonHugePages:" && in >> kb) return kb;
    in.ignore(1 << 12, '\n');
  }
  return -1;
}

// The image useHugePageHeap() re-executed in HugePageHeapReexecutes... below:
// it reports its PID, GLIBC_TUNABLES and whether the small blocks a thread
// other than main allocated (as a server's requests and watches do) got huge
// pages, and leaves before the test runner starts.
const bool kReportedAndLeft = [] {
  const char* path = std::getenv(kReportVariable);
  if (!path) return false;
  std::vector<char*> blocks;
  std::thread([&] {
    for (int i = 0; i < 131'072; ++i) {  // 64 MiB in 512-byte blocks
      auto* b = static_cast<char*>(std::malloc(512));
      std::memset(b, 1, 512);
      blocks.push_back(b);
    }
  }).join();
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  std::ofstream(path) << "exec\n" << ::getpid() << "\n" << (tunables ? tunables : "") << "\n" << anonHugeKb() << "\n";
  for (char* b : blocks) std::free(b);
  std::_Exit(0);
}();

std::string kernelThpMode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  const auto open = line.find('['), close = line.find(']');
  return open == std::string::npos || close == std::string::npos ? "" : line.substr(open + 1, close - open - 1);
}

struct Child {
  int exitCode = -1;
  pid_t pid = 0;
  std::vector<std::string> report;
};

// Forks a child that calls useHugePageHeap() with GLIBC_TUNABLES as given
// (null: unset); a child that was not re-executed reports "returned" and why.
Child runUseHugePageHeap(const char* tunables) {
  char path[] = "/tmp/tally-huge-page-XXXXXX";
  const int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  ::close(fd);
  Child out;
  out.pid = ::fork();
  if (out.pid == 0) {
    if (tunables) {
      ::setenv("GLIBC_TUNABLES", tunables, 1);
    } else {
      ::unsetenv("GLIBC_TUNABLES");
    }
    ::setenv(kReportVariable, path, 1);
    char name[] = "memory-test-reexecuted";
    char* argv[] = {name, nullptr};
    const HugePageHeap heap = useHugePageHeap(argv);
    std::ofstream(path) << "returned\n" << heap.enabled << "\n" << heap.why << "\n";
    std::_Exit(3);
  }
  int status = 0;
  ::waitpid(out.pid, &status, 0);
  out.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.report.push_back(line);
  ::unlink(path);
  return out;
}

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

// tally-extender's --huge-page-heap: where the kernel gives huge pages on
// request, the program re-executes itself in place (the same PID: PID 1 of a
// container stays PID 1) with glibc's tunable, and the heap then has them.
TEST(Memory, HugePageHeapReexecutesInPlaceWithTheTunable) {
  const std::string mode = kernelThpMode();
  const Child child = runUseHugePageHeap(nullptr);
  ASSERT_FALSE(child.report.empty()) << "the child wrote no report (exit " << child.exitCode << ")";
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
  if (mode == "madvise") {
    ASSERT_EQ(child.report[0], "exec") << child.report.size() << " lines, exit " << child.exitCode;
    EXPECT_EQ(child.exitCode, 0);
    ASSERT_EQ(child.report.size(), 4u);
    EXPECT_EQ(child.report[1], std::to_string(child.pid)) << "re-executed in place, not as another process";
    EXPECT_EQ(child.report[2], "glibc.malloc.hugetlb=1:glibc.malloc.arena_max=1");
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    // glibc's own allocator (a sanitizer brings its own) asked for huge pages
    // for the heap another thread's small blocks came from.
    EXPECT_GT(std::stol(child.report[3]), 0) << "AnonHugePages kB in the re-executed image";
#endif
    return;
  }
#endif
  // No re-execution: the kernel gives huge pages to everything (always) or to
  // nothing (never, none), or glibc has no such tunable; the reason is said.
  ASSERT_EQ(child.report[0], "returned") << "kernel mode '" << mode << "'";
  EXPECT_EQ(child.exitCode, 3);
  ASSERT_EQ(child.report.size(), 3u);
  EXPECT_EQ(child.report[1], mode == "always" ? "1" : "0");
  EXPECT_FALSE(child.report[2].empty());
}

// An operator's GLIBC_TUNABLES that already decides (here: no huge pages) is
// left alone: no re-execution, and the answer says what the heap has.
TEST(Memory, HugePageHeapLeavesAnOperatorsTunableAlone) {
  const std::string mode = kernelThpMode();
  const Child child = runUseHugePageHeap("glibc.malloc.hugetlb=0");
  ASSERT_FALSE(child.report.empty()) << "the child wrote no report (exit " << child.exitCode << ")";
  ASSERT_EQ(child.report[0], "returned");
  EXPECT_EQ(child.exitCode, 3);
  ASSERT_EQ(child.report.size(), 3u);
  EXPECT_EQ(child.report[1], mode == "always" ? "1" : "0") << child.report[2];
  if (mode == "madvise") {
    EXPECT_NE(child.report[2].find("glibc.malloc.hugetlb=0"), std::string::npos) << child.report[2];
  }
}

}  // namespace
}  // namespace tally
