// What each fuzz target does with one input, shared by the libFuzzer entry points
// (fuzz/*_fuzzer.cc) and the regression tests that replay saved reproducers (tests/hardening). Each
// function feeds the bytes to the real decoder and aborts (__builtin_trap) when an invariant is
// broken; a crash, hang or leak inside the decoder is the other way they fail.
#pragma once

#include <cstdint>
#include <span>

namespace gpupool::fuzz {

// PTX text through ptx::Module::load and, when it loads, bindGlobals/initialImage.
void consumePtx(std::span<const uint8_t> input);
// A received module image through classify, Fatbin::parse/payload, selectPtx, elfExtent,
// imageExtent and ptxForDevice.
void consumeImage(std::span<const uint8_t> input);
// Client-to-server wire bytes (frames with bulk, Hello first) served by a Session over an emu
// backend; afterwards no device memory may remain allocated.
void consumeServerSession(std::span<const uint8_t> input);

// Server-to-client wire bytes (Welcome, then Responses with bulk) read by a real client
// RemoteSession, through a fake server on loopback TCP (client_reply_input.cc).
void consumeClientReply(std::span<const uint8_t> input);

// A hostile client's script against gpupoold's end of a real shm:// connection: bytes and any
// value in any count or word of the shared rings, between the server's reads, replies and
// give-backs (shm_ring_input.cc). The server must fail only that connection, never write the
// client's ring or the counts the client owns, and keep what the client has yet to read.
void consumeShmRing(std::span<const uint8_t> input);

}  // namespace gpupool::fuzz
