// Callbacks an application registers for events this driver never raises (driver log messages,
// device-memory budget notifications): the registration is real (the handle stays valid until it
// is unregistered, once, with the key it was registered under), the callback is never called
// because its event never happens here.
#pragma once

#include <map>
#include <memory>
#include <mutex>

namespace gpupool::client {

// Handle: the opaque pointer type cuda.h names the registration by. Key: what a registration
// belongs to (a device ordinal, or nothing), checked again when it is unregistered.
template <typename Handle, typename Key = int>
class CallbackRegistry {
 public:
  Handle add(Key key) {
    auto entry = std::make_unique<Entry>(Entry{key});
    auto handle = reinterpret_cast<Handle>(entry.get());
    std::lock_guard lock(mutex_);
    entries_.emplace(handle, std::move(entry));
    return handle;
  }

  // False when handle is not registered under key (never registered, or already removed).
  bool remove(Handle handle, Key key) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(handle);
    if (it == entries_.end() || it->second->key != key) return false;
    entries_.erase(it);
    return true;
  }

 private:
  struct Entry {
    Key key;  // the entry's address is the handle
  };
  std::mutex mutex_;
  std::map<Handle, std::unique_ptr<Entry>> entries_;
};

}  // namespace gpupool::client
