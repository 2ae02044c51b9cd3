#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <string>
#include <vector>

#include "helpers.hpp"

namespace {

//! What the run did with its test cases: how many ran, how many of those TT_SKIP ended, and
//! which ran no assertion at all and were not skipped (they would pass whatever the code does).
struct RunCounts {
  int ran = 0;
  int skipped = 0;
  std::vector<std::string> unchecked;
};

RunCounts g_counts;

//! A listener (it runs beside the reporters, whatever -r says) that fills g_counts.
class SkipListener : public doctest::IReporter {
 public:
  explicit SkipListener(const doctest::ContextOptions&) {}

  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData& tc) override {
    current_ = &tc;
    tiletune::test::g_skip_current = false;
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  //! Called once per test case, after all its subcases; the counts cover every pass.
  void test_case_end(const doctest::CurrentTestCaseStats& stats) override {
    g_counts.ran += 1;
    if (tiletune::test::g_skip_current) {
      g_counts.skipped += 1;
    } else if (stats.numAssertsCurrentTest == 0 && current_) {
      g_counts.unchecked.push_back(std::string(current_->m_file.c_str()) + ":" + std::to_string(current_->m_line) +
                                   ": " + current_->m_name);
    }
    tiletune::test::g_skip_current = false;
    current_ = nullptr;
  }
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}

 private:
  const doctest::TestCaseData* current_ = nullptr;
};

REGISTER_LISTENER("tiletune-skips", 1, SkipListener);

}  // namespace

//! doctest's exit status, then: 1 if a test case that ran checked nothing, and 77 (ctest's
//! SKIP_RETURN_CODE, see CMakeLists.txt) if every test case that ran was skipped by TT_SKIP.
int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);  // the in-process daemons' request log stays quiet
  doctest::Context context(argc, argv);
  int rc = context.run();
  if (context.shouldExit() || rc != 0) return rc;  // --help, --list-test-cases, ... or failures
  if (!g_counts.unchecked.empty()) {
    std::cerr << "[tiletune] " << g_counts.unchecked.size()
              << " test case(s) ran without a single assertion (use TT_SKIP to skip one):\n";
    for (auto& name : g_counts.unchecked) std::cerr << "  " << name << "\n";
    return 1;
  }
  if (g_counts.ran > 0 && g_counts.skipped == g_counts.ran) {
    std::cerr << "[tiletune] all " << g_counts.ran << " test case(s) that ran were skipped\n";
    return 77;
  }
  return rc;
}
