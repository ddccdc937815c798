#include "transport/open_file_limit.h"

#include <sys/resource.h>

namespace gpupool::transport {

OpenFileLimit raiseOpenFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return {};
  OpenFileLimit result{limit.rlim_cur, limit.rlim_cur, limit.rlim_max};
  if (limit.rlim_cur >= limit.rlim_max) return result;
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) == 0) result.soft = limit.rlim_cur;
  return result;
}

}  // namespace gpupool::transport
