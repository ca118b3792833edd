// The test runner: doctest's main, plus a listener that ends the run with one plain line,
// "N passed, N failed, N skipped", the line CI reads. Skipped counts test cases not run
// (CUDA cases without a GPU, or filtered out).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace {
struct Totals {
  unsigned passed = 0, failed = 0, skipped = 0;
  bool done = false;
};
Totals g_totals;

struct TotalsListener : doctest::IReporter {
  explicit TotalsListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& s) override {
    g_totals.passed = s.numTestCasesPassingFilters - s.numTestCasesFailed;
    g_totals.failed = s.numTestCasesFailed;
    g_totals.skipped = s.numTestCases - s.numTestCasesPassingFilters;
    g_totals.done = true;
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
}  // namespace

DOCTEST_REGISTER_LISTENER("totals", 1, TotalsListener);

int main(int argc, char** argv) {
  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  int rc = ctx.run();
  if (ctx.shouldExit()) return rc;
  if (g_totals.done)
    std::printf("%u passed, %u failed, %u skipped\n", g_totals.passed, g_totals.failed, g_totals.skipped);
  return rc;
}
