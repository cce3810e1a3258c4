#include "tally/common/memory.hpp"

#include <unistd.h>

#include <cstdlib>  // defines __GLIBC__ under glibc
#include <fstream>
#include <string_view>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tally {

std::size_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  const long pageSize = ::sysconf(_SC_PAGESIZE);
  return pageSize > 0 ? resident * static_cast<std::size_t>(pageSize) : 0;
}

bool releaseFreeMemory() {
#if defined(__GLIBC__)
  return ::malloc_trim(0) != 0;
#else
  return false;
#endif
}

namespace {

constexpr std::string_view kTunable = "glibc.malloc.hugetlb";
constexpr std::string_view kArenaMax = "glibc.malloc.arena_max";

// The kernel's mode, the bracketed word of "always [madvise] never"; empty
// where the file is missing (no THP support).
std::string kernelMode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(in, line)) return {};
  const auto open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return {};
  return line.substr(open + 1, close - open - 1);
}

}  // namespace

// glibc reads malloc.hugetlb from 2.35 on.
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define TALLY_HUGETLB_TUNABLE 1
#endif

HugePageHeap hugePageHeap() {
#if defined(TALLY_HUGETLB_TUNABLE)
  const std::string mode = kernelMode();
  if (mode.empty()) return {false, "the kernel offers no transparent huge pages"};
  if (mode == "never") return {false, "transparent huge pages are off (kernel mode never)"};
  if (mode == "always") return {true, "the kernel backs every large mapping with huge pages (mode always)"};
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  const std::string_view set = tunables ? tunables : "";
  const auto at = set.find(kTunable);
  if (at == std::string_view::npos) return {false, "kernel mode " + mode + " and GLIBC_TUNABLES does not ask for them"};
  const std::string_view value = set.substr(at + kTunable.size());
  const bool on = value.starts_with("=1") || value.starts_with("=2");
  return {on, std::string("kernel mode ") + mode + ", GLIBC_TUNABLES " + std::string(set)};
#else
  return {false, "the C library has no huge-page heap setting (glibc 2.35 or later has)"};
#endif
}

HugePageHeap useHugePageHeap(char** argv) {
#if defined(TALLY_HUGETLB_TUNABLE)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  const std::string_view set = tunables ? tunables : "";
  if (kernelMode() == "madvise" && set.find(kTunable) == std::string_view::npos) {
    std::string value = set.empty() ? std::string() : std::string(set) + ":";
    // glibc asks for huge pages for its main heap and its large mappings,
    // not for the heaps of the arenas it adds for other threads, where a
    // server's requests and watches allocate: one arena, then (each thread's
    // cache still serves its small blocks without the arena's lock).
    value += std::string(kTunable) + "=1:" + std::string(kArenaMax) + "=1";
    // The tunable now names this setting, so the new image does not come back here.
    if (::setenv("GLIBC_TUNABLES", value.c_str(), 1) == 0) {
      ::execv("/proc/self/exe", argv);
      // Not re-executed (no /proc, or exec refused): go on as we are.
      if (tunables) {
        ::setenv("GLIBC_TUNABLES", tunables, 1);
      } else {
        ::unsetenv("GLIBC_TUNABLES");
      }
      return {false, "re-executing with GLIBC_TUNABLES " + value + " failed"};
    }
  }
#else
  (void)argv;
#endif
  return hugePageHeap();
}

}  // namespace tally
