// A watchdog for the whole test binary: a test that runs past LOCKSTEP_TEST_WATCHDOG_S seconds
// (default 240, under ctest's 300 s timeout) gets its name and every thread's stack printed, its
// own and its child processes' (gdb), also into LOCKSTEP_WATCHDOG_DIR/<test>.log when that is
// set (scripts/test.sh reads it), then the process aborts. A hang in CI then names where it waits
// instead of ending as a silent timeout. Its own test hangs on purpose, in a child run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "testing/run_cli.h"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;

// Appends every thread's stack of `pid` (gdb in batch mode) to the report.
void AppendStacks(pid_t pid, std::string* report) {
  int rc = 0;
  *report += testing::RunShell(
      fmt::format("gdb -p {} -batch -nx -ex 'set pagination off' -ex 'thread apply all bt' 2>&1 "
                  "| grep -E '^(Thread|#)'",
                  pid),
      &rc);
  if (rc != 0) *report += "(gdb gave no stacks)\n";
}

// The direct children of this process (a test's `lockstep serve`, a CLI run under timeout);
// gtest runs tests on the main thread, whose id is the process id.
std::string ChildPids() {
  std::ifstream f(fmt::format("/proc/self/task/{}/children", ::getpid()));
  std::string pids;
  std::getline(f, pids);
  return pids;
}

class Watchdog : public ::testing::EmptyTestEventListener {
 public:
  Watchdog() {
    const char* env = std::getenv("LOCKSTEP_TEST_WATCHDOG_S");
    limit_ = std::chrono::seconds(env != nullptr && std::atoi(env) > 0 ? std::atoi(env) : 240);
    std::thread([this] { Watch(); }).detach();  // lives as long as the process
  }

  void OnTestStart(const ::testing::TestInfo& info) override {
    std::lock_guard<std::mutex> lock(mu_);
    name_ = std::string(info.test_suite_name()) + "." + info.name();
    started_ = Clock::now();
    running_ = true;
  }
  void OnTestEnd(const ::testing::TestInfo&) override {
    std::lock_guard<std::mutex> lock(mu_);
    running_ = false;
  }

 private:
  void Watch() {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      std::string name;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!running_ || Clock::now() - started_ < limit_) continue;
        name = name_;
      }
      std::string report = fmt::format("watchdog: {} has run for {} s; the stacks of every thread:\n",
                                       name, limit_.count());
      AppendStacks(::getpid(), &report);
      std::istringstream children(ChildPids());
      for (pid_t child; children >> child;) {
        report += fmt::format("watchdog: child process {}:\n", child);
        AppendStacks(child, &report);
      }
      report += fmt::format("watchdog: {} aborted\n", name);
      std::fprintf(stderr, "\n%s", report.c_str());
      std::fflush(stderr);
      if (const char* dir = std::getenv("LOCKSTEP_WATCHDOG_DIR"); dir != nullptr && *dir != 0)
        std::ofstream(fmt::format("{}/{}.log", dir, name)) << report;
      std::abort();
    }
  }

  std::mutex mu_;
  std::string name_;
  Clock::time_point started_;
  bool running_ = false;
  std::chrono::seconds limit_{240};
};

// Registered before gtest_main runs the tests; gtest owns the listener.
const bool kWatchdogInstalled = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new Watchdog);
  return true;
}();

// Hangs only when asked to (the check below runs it in a child process).
TEST(WatchdogSelf, HangsWhenAsked) {
  if (std::getenv("LOCKSTEP_TEST_HANG") == nullptr) GTEST_SKIP() << "runs only as a child";
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

TEST(Watchdog, AHungTestIsNamedWithItsStacksAndAborted) {
  ASSERT_TRUE(kWatchdogInstalled);
  int rc = 0;
  const std::string out = testing::RunShell(
      "LOCKSTEP_WATCHDOG_DIR= LOCKSTEP_TEST_HANG=1 LOCKSTEP_TEST_WATCHDOG_S=2 /proc/" + std::to_string(::getpid()) +
          "/exe --gtest_filter=WatchdogSelf.HangsWhenAsked 2>&1",
      &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(rc, 124) << "the watchdog never fired:\n" << out;
  EXPECT_NE(out.find("watchdog: WatchdogSelf.HangsWhenAsked has run for 2 s"), std::string::npos)
      << out;
  int gdb_rc = 0;
  testing::RunShell("gdb --version > /dev/null 2>&1", &gdb_rc);
  if (gdb_rc == 0)
    EXPECT_NE(out.find("WatchdogSelf_HangsWhenAsked_Test::TestBody"), std::string::npos)
        << "no stack names the hung test:\n"
        << out;
  else
    std::printf("  gdb is missing here: the report names the test without stacks\n");
  EXPECT_NE(out.find("watchdog: WatchdogSelf.HangsWhenAsked aborted"), std::string::npos) << out;
}

}  // namespace
}  // namespace lockstep
