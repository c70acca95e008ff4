#include "base/thread_name.h"

#include <pthread.h>

#include <string>

namespace cellar {

void NameThisThread(std::string_view name) {
  constexpr size_t kLinuxMax = 15;  // TASK_COMM_LEN - 1
  const std::string cut(name.substr(0, kLinuxMax));
  pthread_setname_np(pthread_self(), cut.c_str());  // best effort, see the header
}

}  // namespace cellar
