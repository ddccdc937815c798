#include "server/tenant_status.h"

namespace gpupool::server {

void fillTenantStatus(TenantPool& pool, const std::vector<SessionSnapshot>& sessions,
                      wire::Response::StatusReply::Builder status) {
  auto accounts = pool.tenants().accounts();
  UsageByKey usage = pool.usage().totals();
  auto list = status.initTenants(static_cast<unsigned>(accounts.size()));
  for (unsigned i = 0; i < accounts.size(); ++i) {
    const auto& account = *accounts[i];
    TenantConfig policy = account.policy();
    auto t = list[i];
    t.setName(account.name());
    t.setMemoryUsed(account.memoryUsed());
    t.setMemoryQuota(policy.memoryQuota);
    t.setPriority(priorityName(policy.priority));
    t.setWeight(policy.weight);
    uint32_t live = 0;
    for (const auto& s : sessions) live += s.tenant == account.name();
    t.setSessions(live);
    UsageTotals sum;
    for (const auto& [key, u] : usage) {
      if (key.first == account.name()) sum.add(u);
    }
    t.setGpuSeconds(sum.gpuSeconds);
    t.setGibSeconds(sum.gibSeconds);
    t.setQueueSeconds(sum.queueSeconds);
    t.setBytesIn(sum.bytesIn);
    t.setBytesOut(sum.bytesOut);
    t.setCalls(sum.calls);
    t.setLaunches(sum.launches);
  }
}

}  // namespace gpupool::server
