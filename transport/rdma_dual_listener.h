// One Listener over two: gpupoold's TCP listener and its RDMA listener, so the server's single
// accept loop serves clients of both transports.
#pragma once

#include <memory>

#include "transport/connection.h"

namespace gpupool::transport {

// accept() returns the next connection from either listener (a failed accept on one of them is
// reported as TransportError and the other keeps serving); shutdown() stops both. url() is the
// first listener's (what `gpupoold` prints and `gpupool status` shows as the listen address).
std::unique_ptr<Listener> listenOnBoth(std::unique_ptr<Listener> first,
                                       std::unique_ptr<Listener> second);

}  // namespace gpupool::transport
