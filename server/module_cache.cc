#include "server/module_cache.h"

namespace gpupool::server {

std::shared_ptr<const std::vector<uint8_t>> ModuleCache::find(const protocol::Sha256Digest& key) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.image;
}

protocol::Sha256Digest ModuleCache::insert(std::shared_ptr<const std::vector<uint8_t>> image) {
  protocol::Sha256Digest key = protocol::Sha256::of(*image);
  std::lock_guard lock(mutex_);
  if (entries_.count(key)) return key;
  lru_.push_front(key);
  bytes_ += image->size();
  entries_[key] = Entry{std::move(image), lru_.begin()};
  while (bytes_ > capacity_ && lru_.size() > 1) {
    auto victim = entries_.find(lru_.back());
    bytes_ -= victim->second.image->size();
    entries_.erase(victim);
    lru_.pop_back();
  }
  return key;
}

}  // namespace gpupool::server
