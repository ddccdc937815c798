// Fills the tenants part of a status reply: each tenant's memory against its quota, its policy, its
// live sessions and its usage totals (including what earlier runs stored).
#pragma once

#include <vector>

#include "protocol/gpupool.capnp.h"
#include "server/session.h"
#include "server/tenant_pool.h"

namespace gpupool::server {

void fillTenantStatus(TenantPool& pool, const std::vector<SessionSnapshot>& sessions,
                      wire::Response::StatusReply::Builder status);

}  // namespace gpupool::server
