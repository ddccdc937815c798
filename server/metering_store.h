// Durable usage records in SQLite: one row per (flush, tenant, device) with the amounts of that
// interval, so a report for any period is a sum, and a restart loses nothing already flushed.
//
// Contract: append() writes a batch in one transaction (all rows or none, then false with the
// reason). report() sums rows recorded at or after `since` (Unix seconds) per tenant and device.
// One MeteringStore per thread; the server and `gpupool usage` may open the same file at once
// (SQLite's locking, WAL mode).
#pragma once

#include <memory>
#include <string>

#include "server/metering_ledger.h"

struct sqlite3;

namespace gpupool::server {

class MeteringStore {
 public:
  // Opens (creating when missing) the database. Null with the reason on failure.
  static std::unique_ptr<MeteringStore> open(const std::string& path, bool readOnly,
                                             std::string* error);
  ~MeteringStore();

  bool append(double unixTime, const UsageByKey& batch, std::string* error);
  UsageByKey report(double sinceUnixTime, std::string* error) const;

 private:
  explicit MeteringStore(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

}  // namespace gpupool::server
