// Connections that have not completed their Hello yet ("strangers"), bounded in total and per
// source address, so a flood of silent or slow connections cannot take the threads, descriptors
// and memory that tenants need (docs/hardening.md, "Strangers").
//
// PoolServer asks admit() for every accepted connection before it starts anything for it; a
// refused connection is closed at once. An admitted one holds a Lease until its Hello is answered
// (then it is a session, bounded by --max-sessions and the tenants' max_sessions) or it ends. The
// handshake deadline itself is enforced by PoolServer's watchdog, which counts closes here.
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace gpupool::server {

struct StrangerLimits {
  unsigned total = 1024;     // strangers at once, all sources (0 = no limit)
  unsigned perSource = 256;  // strangers at once from one address (0 = no limit)
};

struct StrangerCounters {
  uint64_t current = 0;           // strangers now
  uint64_t refusedTotal = 0;      // refused: the total limit was reached
  uint64_t refusedPerSource = 0;  // refused: their source's limit was reached
  uint64_t closedByDeadline = 0;  // closed for not completing Hello in time
};

class StrangerGate {
 public:
  using Limits = StrangerLimits;
  using Counters = StrangerCounters;

  // Counts one stranger from `source` until released (or the Lease is destroyed).
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept;
    ~Lease() { release(); }
    void release();
    bool held() const { return gate_ != nullptr; }

   private:
    friend class StrangerGate;
    Lease(StrangerGate* gate, std::string source) : gate_(gate), source_(std::move(source)) {}
    StrangerGate* gate_ = nullptr;
    std::string source_;
  };

  StrangerGate() = default;
  void setLimits(const Limits& limits);

  // A lease for a new connection from `source`; an empty one (counting the refusal, and with
  // *why saying which limit) when `source` or the server is at its limit.
  Lease admit(const std::string& source, std::string* why);
  // Whether to log a refusal or a close concerning `source` now: once per source per interval,
  // so a flood cannot flood the log too.
  bool shouldLog(const std::string& source, std::chrono::steady_clock::time_point now);
  void countDeadlineClose();
  Counters counters() const;

  static constexpr std::chrono::seconds kLogInterval{10};

 private:
  void release(const std::string& source);

  mutable std::mutex mutex_;
  Limits limits_;
  std::map<std::string, unsigned> bySource_;
  Counters counters_;
  std::map<std::string, std::chrono::steady_clock::time_point> lastLogged_;
};

// The address part of a peer string such as "127.0.0.1:4242", "::1:4242" or "[::1]:4242".
std::string sourceAddressOf(const std::string& peer);

}  // namespace gpupool::server
