#pragma once
// The allocator's side of a process's resident memory.

#include <cstddef>
#include <string>

namespace tally {

// The process's resident set in bytes (/proc/self/statm), 0 where unknown.
std::size_t residentBytes();

// Hands the allocator's free pages back to the system. glibc keeps what a
// peak freed, in every thread's arena, until asked: call after a large
// transient, such as the initial lists. False where the allocator offers no
// such call or had nothing to give back.
bool releaseFreeMemory();

// Whether the heap sits in transparent huge pages, and why (for the start-up
// log): a process whose requests walk a large cluster model at random (the
// extender's rows, maps and name index) misses the TLB on most cold loads
// with 4 KiB pages, a page walk on top of the cache miss.
struct HugePageHeap {
  bool enabled = false;
  std::string why;
};

// Where the kernel gives transparent huge pages only on request (its mode
// `madvise`, Debian's default) and the environment does not already choose,
// re-executes this program in place (same PID, argv and environment) with
// glibc's malloc.hugetlb tunable, which makes malloc ask for them, and
// malloc.arena_max=1: glibc asks only for its main heap, so every thread
// allocates there (small blocks still come from each thread's cache). glibc
// reads tunables only at start-up, so call this first in main(), before any
// thread or file is opened. Returns only when it did not re-execute, with
// what the heap has.
HugePageHeap useHugePageHeap(char** argv);

// What the heap has, without re-executing.
HugePageHeap hugePageHeap();

}  // namespace tally
