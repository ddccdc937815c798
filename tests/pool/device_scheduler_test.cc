// The device scheduler with simulated kernels (threads that hold the device for a fixed time): the
// measured launch counts show weighted fair share, strict priority and the starvation bound.
#include "server/device_scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace gpupool::server {
namespace {

using namespace std::chrono_literals;

struct Tenant {
  std::string name;
  PriorityClass priority;
  double weight;
  std::atomic<int> launches{0};
  std::atomic<double> waited{0};
};

// Each tenant keeps one kernel of `kernel` length queued at all times for `window`.
void run(DeviceScheduler& scheduler, std::vector<Tenant*> tenants, std::chrono::milliseconds kernel,
         std::chrono::milliseconds window) {
  auto end = std::chrono::steady_clock::now() + window;
  std::vector<std::thread> threads;
  for (Tenant* t : tenants) {
    threads.emplace_back([&, t] {
      while (std::chrono::steady_clock::now() < end) {
        auto wait = scheduler.acquire(t->name, t->priority, t->weight);
        t->waited = t->waited + std::chrono::duration<double>(wait).count();
        std::this_thread::sleep_for(kernel);
        scheduler.release(t->name, t->weight, kernel);
        ++t->launches;
      }
    });
  }
  for (auto& th : threads) th.join();
}

TEST(DeviceSchedulerTest, SharesByWeightInsideAClass) {
  DeviceScheduler scheduler(10s);
  Tenant heavy{"heavy", PriorityClass::kNormal, 3}, light{"light", PriorityClass::kNormal, 1};
  run(scheduler, {&heavy, &light}, 2ms, 600ms);
  double ratio = double(heavy.launches) / std::max(1, light.launches.load());
  EXPECT_GT(ratio, 2.2) << heavy.launches << " vs " << light.launches;
  EXPECT_LT(ratio, 4.0) << heavy.launches << " vs " << light.launches;
  EXPECT_GT(light.waited.load(), 0.0);
}

TEST(DeviceSchedulerTest, HighPriorityOvertakesLowUpToTheStarvationBound) {
  DeviceScheduler scheduler(100ms);
  Tenant high{"high", PriorityClass::kHigh, 1}, low{"low", PriorityClass::kLow, 100};
  run(scheduler, {&high, &low}, 2ms, 700ms);
  // Low runs only when it has starved for the bound: a handful of launches, never none.
  EXPECT_GE(low.launches, 3) << "low starved completely";
  EXPECT_LE(low.launches, 12);
  EXPECT_GT(high.launches, 10 * low.launches);
}

TEST(DeviceSchedulerTest, IdleTimeBanksNoCredit) {
  DeviceScheduler scheduler(10s);
  Tenant early{"early", PriorityClass::kNormal, 1}, late{"late", PriorityClass::kNormal, 1};
  run(scheduler, {&early}, 2ms, 200ms);
  int before = early.launches;
  run(scheduler, {&early, &late}, 2ms, 400ms);
  // Had `late` kept virtual time 0 while `early` ran alone, it would have had the device to
  // itself for the first ~200 ms: about three launches to every one of early's.
  double ratio = double(early.launches - before) / std::max(1, late.launches.load());
  EXPECT_GT(ratio, 0.6) << early.launches - before << " vs " << late.launches;
  EXPECT_LT(ratio, 1.6) << early.launches - before << " vs " << late.launches;
}

TEST(DeviceSchedulerTest, ReportsUtilization) {
  DeviceScheduler scheduler(10s);
  scheduler.sampleUtilization();
  Tenant t{"t", PriorityClass::kNormal, 1};
  run(scheduler, {&t}, 5ms, 100ms);
  std::this_thread::sleep_for(100ms);
  double u = scheduler.sampleUtilization();
  EXPECT_GT(u, 0.25);
  EXPECT_LT(u, 0.8);
  EXPECT_NEAR(scheduler.busySeconds(), 0.1, 0.05);
}

}  // namespace
}  // namespace gpupool::server
