#pragma once
// The allocator's side of a process's resident memory.

#include <cstddef>

namespace tally {

// The process's resident set in bytes (/proc/self/statm), 0 where unknown.
std::size_t residentBytes();

// Hands the allocator's free pages back to the system. glibc keeps what a
// peak freed, in every thread's arena, until asked: call after a large
// transient, such as the initial lists. False where the allocator offers no
// such call or had nothing to give back.
bool releaseFreeMemory();

}  // namespace tally
