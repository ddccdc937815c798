// A context's driver streams or events by the ids handed to its client, shared between the
// session's thread, which creates, uses and destroys them, and waiter threads, which only wait on
// them (server/backend.h). A handle destroyed while waits on it are under way leaves the table at
// once but is destroyed by the last of those waits when it ends: the real driver must never be
// given a destroyed handle.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "common/status.h"

namespace gpupool::server {

template <typename Handle>
class DriverHandleTable {
 public:
  // `destroy` gives a handle back to the driver; it may run on a waiter thread.
  explicit DriverHandleTable(std::function<Status(Handle)> destroy)
      : destroy_(std::move(destroy)) {}

  void add(uint64_t id, Handle handle) {
    std::lock_guard lock(mutex_);
    entries_[id] = std::make_shared<Entry>(Entry{handle});
  }

  // For the session's thread: the handle stays valid until that thread removes it.
  std::optional<Handle> find(uint64_t id) const {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    return it->second->handle;
  }

  // From any thread: `wait(handle)`, run without the table's lock; nullopt for an unknown id.
  std::optional<Status> wait(uint64_t id, const std::function<Status(Handle)>& wait) {
    std::shared_ptr<Entry> entry;
    {
      std::lock_guard lock(mutex_);
      auto it = entries_.find(id);
      if (it == entries_.end()) return std::nullopt;
      entry = it->second;
      ++entry->waits;
    }
    Status status = wait(entry->handle);
    bool destroyNow;
    {
      std::lock_guard lock(mutex_);
      destroyNow = --entry->waits == 0 && entry->removed;
    }
    // Its removal has already been answered: what the driver says now has no one to go to.
    if (destroyNow) (void)destroy_(entry->handle);
    return status;
  }

  // For the session's thread: destroys the handle (later, when waits are using it) and forgets
  // the id; nullopt for an unknown id. When the driver refuses, the handle stays.
  std::optional<Status> remove(uint64_t id) {
    std::shared_ptr<Entry> entry;
    {
      std::lock_guard lock(mutex_);
      auto it = entries_.find(id);
      if (it == entries_.end()) return std::nullopt;
      entry = std::move(it->second);
      entries_.erase(it);
      if (entry->waits > 0) {
        entry->removed = true;
        return Status::success();
      }
    }
    Status status = destroy_(entry->handle);
    if (!status.ok()) {
      std::lock_guard lock(mutex_);
      entries_[id] = std::move(entry);
    }
    return status;
  }

  // Every handle, leaving the table empty; for the context's destruction, when no wait runs.
  std::vector<Handle> takeAll() {
    std::lock_guard lock(mutex_);
    std::vector<Handle> handles;
    for (const auto& [id, entry] : entries_) handles.push_back(entry->handle);
    entries_.clear();
    return handles;
  }

 private:
  struct Entry {
    Handle handle;
    int waits = 0;         // waits using the handle now
    bool removed = false;  // out of the table: the last wait destroys it
  };

  const std::function<Status(Handle)> destroy_;
  mutable std::mutex mutex_;
  std::map<uint64_t, std::shared_ptr<Entry>> entries_;
};

}  // namespace gpupool::server
