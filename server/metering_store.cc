#include "server/metering_store.h"

#include <sqlite3.h>

namespace gpupool::server {
namespace {

constexpr const char* kSchema =
    "CREATE TABLE IF NOT EXISTS usage ("
    " recorded_at REAL NOT NULL,"
    " tenant TEXT NOT NULL,"
    " device INTEGER NOT NULL,"
    " gpu_seconds REAL NOT NULL, gib_seconds REAL NOT NULL, queue_seconds REAL NOT NULL,"
    " bytes_in INTEGER NOT NULL, bytes_out INTEGER NOT NULL,"
    " calls INTEGER NOT NULL, launches INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS usage_by_time ON usage(recorded_at);";

std::string lastError(sqlite3* db) { return db ? sqlite3_errmsg(db) : "out of memory"; }

}  // namespace

std::unique_ptr<MeteringStore> MeteringStore::open(const std::string& path, bool readOnly,
                                                   std::string* error) {
  sqlite3* db = nullptr;
  int flags = readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  if (sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK) {
    *error = path + ": " + lastError(db);
    sqlite3_close(db);
    return nullptr;
  }
  sqlite3_busy_timeout(db, 5000);
  if (!readOnly) {
    char* message = nullptr;
    // WAL lets `gpupool usage` read while the server writes.
    sqlite3_exec(db, "PRAGMA journal_mode=WAL;", nullptr, nullptr, nullptr);
    if (sqlite3_exec(db, kSchema, nullptr, nullptr, &message) != SQLITE_OK) {
      *error = path + ": " + (message ? message : "cannot create the usage table");
      sqlite3_free(message);
      sqlite3_close(db);
      return nullptr;
    }
  }
  return std::unique_ptr<MeteringStore>(new MeteringStore(db));
}

MeteringStore::~MeteringStore() { sqlite3_close(db_); }

bool MeteringStore::append(double unixTime, const UsageByKey& batch, std::string* error) {
  if (batch.empty()) return true;
  if (sqlite3_exec(db_, "BEGIN IMMEDIATE;", nullptr, nullptr, nullptr) != SQLITE_OK) {
    *error = lastError(db_);
    return false;
  }
  sqlite3_stmt* insert = nullptr;
  bool ok =
      sqlite3_prepare_v2(db_, "INSERT INTO usage VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10);",
                         -1, &insert, nullptr) == SQLITE_OK;
  for (auto it = batch.begin(); ok && it != batch.end(); ++it) {
    const auto& [key, u] = *it;
    sqlite3_bind_double(insert, 1, unixTime);
    sqlite3_bind_text(insert, 2, key.first.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(insert, 3, key.second);
    sqlite3_bind_double(insert, 4, u.gpuSeconds);
    sqlite3_bind_double(insert, 5, u.gibSeconds);
    sqlite3_bind_double(insert, 6, u.queueSeconds);
    sqlite3_bind_int64(insert, 7, static_cast<sqlite3_int64>(u.bytesIn));
    sqlite3_bind_int64(insert, 8, static_cast<sqlite3_int64>(u.bytesOut));
    sqlite3_bind_int64(insert, 9, static_cast<sqlite3_int64>(u.calls));
    sqlite3_bind_int64(insert, 10, static_cast<sqlite3_int64>(u.launches));
    ok = sqlite3_step(insert) == SQLITE_DONE;
    sqlite3_reset(insert);
  }
  if (!ok) *error = lastError(db_);
  sqlite3_finalize(insert);
  if (ok && sqlite3_exec(db_, "COMMIT;", nullptr, nullptr, nullptr) == SQLITE_OK) return true;
  if (ok) *error = lastError(db_);
  sqlite3_exec(db_, "ROLLBACK;", nullptr, nullptr, nullptr);
  return false;
}

UsageByKey MeteringStore::report(double sinceUnixTime, std::string* error) const {
  UsageByKey out;
  sqlite3_stmt* query = nullptr;
  if (sqlite3_prepare_v2(db_,
                         "SELECT tenant, device, SUM(gpu_seconds), SUM(gib_seconds),"
                         " SUM(queue_seconds), SUM(bytes_in), SUM(bytes_out), SUM(calls),"
                         " SUM(launches) FROM usage WHERE recorded_at >= ?1"
                         " GROUP BY tenant, device ORDER BY tenant, device;",
                         -1, &query, nullptr) != SQLITE_OK) {
    *error = lastError(db_);
    return out;
  }
  sqlite3_bind_double(query, 1, sinceUnixTime);
  int rc;
  while ((rc = sqlite3_step(query)) == SQLITE_ROW) {
    UsageTotals u;
    std::string tenant = reinterpret_cast<const char*>(sqlite3_column_text(query, 0));
    int device = sqlite3_column_int(query, 1);
    u.gpuSeconds = sqlite3_column_double(query, 2);
    u.gibSeconds = sqlite3_column_double(query, 3);
    u.queueSeconds = sqlite3_column_double(query, 4);
    u.bytesIn = static_cast<uint64_t>(sqlite3_column_int64(query, 5));
    u.bytesOut = static_cast<uint64_t>(sqlite3_column_int64(query, 6));
    u.calls = static_cast<uint64_t>(sqlite3_column_int64(query, 7));
    u.launches = static_cast<uint64_t>(sqlite3_column_int64(query, 8));
    out[{tenant, device}] = u;
  }
  if (rc != SQLITE_DONE) *error = lastError(db_);
  sqlite3_finalize(query);
  return out;
}

}  // namespace gpupool::server
