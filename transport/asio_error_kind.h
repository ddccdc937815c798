// Which TransportError::Kind a failed Boost.Asio socket call is (TCP and TLS connections).
#pragma once

#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>

#include "transport/connection.h"

namespace gpupool::transport {

// A receive timeout (SO_RCVTIMEO) surfaces as would_block; everything else loses the channel.
inline TransportError::Kind channelErrorKind(const boost::system::error_code& ec) {
  if (ec == boost::asio::error::would_block || ec == boost::asio::error::try_again) {
    return TransportError::Kind::kTimeout;
  }
  return TransportError::Kind::kDisconnected;
}

}  // namespace gpupool::transport
