#include "server/handlers/request_table.h"

#include <stdexcept>
#include <string>

namespace gpupool::server {

#define GPUPOOL_REQUEST_FAMILY(rows) std::span<const RequestHandlerRow> rows();
#include "server/handlers/request_families.def"
#undef GPUPOOL_REQUEST_FAMILY

namespace {

using FamilyRows = std::span<const RequestHandlerRow> (*)();

constexpr FamilyRows kFamilies[] = {
#define GPUPOOL_REQUEST_FAMILY(rows) rows,
#include "server/handlers/request_families.def"
#undef GPUPOOL_REQUEST_FAMILY
};

}  // namespace

RequestTable::RequestTable() {
  for (FamilyRows family : kFamilies) {
    for (const RequestHandlerRow& row : family()) {
      auto index = static_cast<size_t>(row.kind);
      if (index >= rows_.size()) rows_.resize(index + 1, RequestHandlerRow{row.kind, nullptr});
      if (rows_[index].handle) {
        throw std::logic_error("two handlers for request kind " + std::to_string(index));
      }
      rows_[index] = row;
    }
  }
}

RequestHandler RequestTable::find(wire::Request::Which kind) const {
  auto index = static_cast<size_t>(kind);
  return index < rows_.size() ? rows_[index].handle : nullptr;
}

const RequestHandlerRow* RequestTable::row(wire::Request::Which kind) const {
  auto index = static_cast<size_t>(kind);
  return index < rows_.size() && rows_[index].handle ? &rows_[index] : nullptr;
}

}  // namespace gpupool::server
