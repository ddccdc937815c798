// Module images shared by all sessions, keyed by SHA-256, so an image crosses the wire once per
// server rather than once per process. Bounded: least recently used images are dropped first.
#pragma once

#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "protocol/sha256.h"

namespace gpupool::server {

class ModuleCache {
 public:
  explicit ModuleCache(uint64_t capacityBytes) : capacity_(capacityBytes) {}

  std::shared_ptr<const std::vector<uint8_t>> find(const protocol::Sha256Digest& key);
  // Stores `image` under its own hash (computed here: a client cannot choose the key).
  protocol::Sha256Digest insert(std::shared_ptr<const std::vector<uint8_t>> image);

 private:
  struct Entry {
    std::shared_ptr<const std::vector<uint8_t>> image;
    std::list<protocol::Sha256Digest>::iterator lru;
  };
  std::mutex mutex_;
  uint64_t capacity_;
  uint64_t bytes_ = 0;
  std::map<protocol::Sha256Digest, Entry> entries_;
  std::list<protocol::Sha256Digest> lru_;  // most recent first
};

}  // namespace gpupool::server
