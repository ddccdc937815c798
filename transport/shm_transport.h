// Shared-memory transport (shm://PATH, PATH a Unix socket) for clients on the server's own host.
//
// Per connection the client creates a memory file (memfd, sealed against shrinking and growing)
// holding one byte ring per direction (shm_ring.h), and passes it over the Unix socket with
// SCM_RIGHTS in a setup message. Frames then travel through the rings in FramedConnection's format.
// The socket stays open for three things: the server's event loop watches it (its readiness
// descriptor), the producer sends it a byte when the consumer waits in that loop, and its closing
// tells either side that the peer is gone, whereupon the server unmaps the file.
//
// The server takes the setup message when the socket first turns readable, not in accept(), so a
// client that connects and says nothing holds no accepting thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "transport/connection.h"
#include "transport/endpoint.h"

namespace gpupool::transport {

// Bytes per ring (each direction) unless the connector asks otherwise.
// 2 MiB: a 1 MiB piece of streamed bulk and its frame head fit at once, as in a TCP socket's
// buffers. Memory file pages are only allocated once the ring's counts have passed them.
constexpr uint32_t kShmDefaultRingBytes = 2u << 20;

// Connects to the Unix socket of `endpoint` (scheme shm) with rings of `ringBytes` (a power of
// two, 4 KiB to 1 GiB). Throws TransportError with the reason.
std::unique_ptr<Connection> shmConnect(const Endpoint& endpoint,
                                       uint32_t ringBytes = kShmDefaultRingBytes);

// Listens on the Unix socket of `endpoint`, replacing a stale socket file left there (not any
// other kind of file); the file is removed when the listener goes. `pollMax`: the longest an
// accepted connection's awaitFrameBriefly() spins (0: it never does).
std::unique_ptr<Listener> shmListen(
    const Endpoint& endpoint, std::chrono::microseconds pollMax = std::chrono::microseconds(0));

// Sends one record of `size` bytes carrying descriptor `fd` (SCM_RIGHTS) on a Unix socket: how a
// client passes its memory files. False (errno set) when it did not go whole.
bool sendRecordWithFile(int socket, const void* data, size_t size, int fd);

}  // namespace gpupool::transport
