#pragma once
// Names the calling thread as `top -H`, `perf` and /proc/PID/task/*/comm show
// it. Linux keeps 15 bytes; longer names are cut, never refused.

#include <pthread.h>

#include <string>
#include <string_view>

namespace tally {

inline void nameThisThread(std::string_view name) {
  std::string cut(name.substr(0, 15));
  pthread_setname_np(pthread_self(), cut.c_str());
}

}  // namespace tally
