#include "server/readiness_set.h"

#include <stdexcept>

namespace gpupool::server {

std::unique_ptr<ReadinessSet> makeEpollReadinessSet();
std::unique_ptr<ReadinessSet> makeUringReadinessSet();

std::unique_ptr<ReadinessSet> makeReadinessSet(const std::string& kind) {
  if (kind == "epoll") return makeEpollReadinessSet();
  if (kind == "io_uring") return makeUringReadinessSet();
  throw std::invalid_argument("unknown event loop \"" + kind + "\" (epoll or io_uring)");
}

}  // namespace gpupool::server
