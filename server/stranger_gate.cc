#include "server/stranger_gate.h"

namespace gpupool::server {

StrangerGate::Lease& StrangerGate::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    release();
    gate_ = std::exchange(other.gate_, nullptr);
    source_ = std::move(other.source_);
  }
  return *this;
}

void StrangerGate::Lease::release() {
  if (StrangerGate* gate = std::exchange(gate_, nullptr)) gate->release(source_);
}

void StrangerGate::setLimits(const Limits& limits) {
  std::lock_guard lock(mutex_);
  limits_ = limits;
}

StrangerGate::Lease StrangerGate::admit(const std::string& source, std::string* why) {
  std::lock_guard lock(mutex_);
  if (limits_.total && counters_.current >= limits_.total) {
    ++counters_.refusedTotal;
    *why = std::to_string(limits_.total) +
           " connections have not completed their handshake yet (--max-unauthenticated)";
    return {};
  }
  unsigned& fromSource = bySource_[source];
  if (limits_.perSource && fromSource >= limits_.perSource) {
    ++counters_.refusedPerSource;
    *why = std::to_string(limits_.perSource) + " connections from " + source +
           " have not completed their handshake yet (--max-unauthenticated-per-source)";
    return {};
  }
  ++fromSource;
  ++counters_.current;
  return Lease(this, source);
}

void StrangerGate::release(const std::string& source) {
  std::lock_guard lock(mutex_);
  auto it = bySource_.find(source);
  if (it != bySource_.end() && --it->second == 0) bySource_.erase(it);
  --counters_.current;
}

bool StrangerGate::shouldLog(const std::string& source, std::chrono::steady_clock::time_point now) {
  std::lock_guard lock(mutex_);
  // Forget sources that have been quiet for an interval, so the map stays as small as the flood's
  // recent sources.
  if (lastLogged_.size() > 4096) {
    std::erase_if(lastLogged_,
                  [&](const auto& entry) { return now - entry.second >= kLogInterval; });
  }
  auto [it, first] = lastLogged_.try_emplace(source, now);
  if (first) return true;
  if (now - it->second < kLogInterval) return false;
  it->second = now;
  return true;
}

void StrangerGate::countDeadlineClose() {
  std::lock_guard lock(mutex_);
  ++counters_.closedByDeadline;
}

StrangerGate::Counters StrangerGate::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

std::string sourceAddressOf(const std::string& peer) {
  // Every transport names its peer ADDRESS:PORT (IPv6 with or without brackets).
  std::string address = peer.substr(0, peer.rfind(':'));
  if (address.size() > 2 && address.front() == '[' && address.back() == ']') {
    address = address.substr(1, address.size() - 2);
  }
  return address;
}

}  // namespace gpupool::server
