#pragma once
// Names a thread as `top -H`, `perf` and /proc/PID/task/*/comm show it. Linux
// keeps 15 bytes; longer names are cut, never refused. Threads are named by
// whoever starts them, right after, so the name is there when start() returns.

#include <pthread.h>

#include <string>
#include <string_view>

namespace tally {

inline void nameThread(pthread_t thread, std::string_view name) {
  std::string cut(name.substr(0, 15));
  pthread_setname_np(thread, cut.c_str());
}

inline void nameThisThread(std::string_view name) { nameThread(pthread_self(), name); }

}  // namespace tally
