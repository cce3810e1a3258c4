#include "tally/common/memory.hpp"

#include <unistd.h>

#include <cstdlib>  // defines __GLIBC__ under glibc
#include <fstream>

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

}  // namespace tally
