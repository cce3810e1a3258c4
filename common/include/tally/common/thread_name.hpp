#pragma once
// Names a thread as `top -H`, `perf` and /proc/PID/task/*/comm show it. Linux
// keeps 15 bytes; longer names are cut, never refused. Threads are named by
// whoever starts them, right after, so the name is there when start() returns.

#include <pthread.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <string_view>

namespace tally {

inline void nameThread(pthread_t thread, std::string_view name) {
  std::string cut(name.substr(0, 15));
  pthread_setname_np(thread, cut.c_str());
}

inline void nameThisThread(std::string_view name) { nameThread(pthread_self(), name); }

// The names of this process's threads, as /proc/self/task/*/comm shows them.
inline std::multiset<std::string> threadNamesOfThisProcess() {
  std::multiset<std::string> names;
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", error)) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (std::getline(comm, name)) names.insert(name);
  }
  return names;
}

}  // namespace tally
