// The scalar rules as numbers (include/ddx/dense/scalar.h) against their
// oracles: PostgreSQL's own results in test/fixtures/scalar_cases.tsv (made
// and checked on every run by test/soak/scalar_cases.py: each rule's value
// as PostgreSQL computes its SQL, each partial as ddx's SQL program computes
// the gradient), bit for bit, errors by SQLSTATE; and central differences of
// the value at random points.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ddx/core/rules.h"
#include "ddx/dense/scalar.h"

#ifndef DDX_FIXTURES_DIR
#error "DDX_FIXTURES_DIR: test/fixtures (CMakeLists.txt)"
#endif

namespace {

using ddx::dense::Args;
using ddx::dense::Fault;
using ddx::dense::FindScalarRule;
using ddx::dense::ScalarRule;

std::vector<std::string> Split(const std::string &s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, sep)) out.push_back(part);
  return out;
}

// Python's repr of a float, or PostgreSQL's spelling of an argument
// ("Infinity", "NaN"): strtod reads both.
double Number(const std::string &s) { return std::strtod(s.c_str(), nullptr); }

// The outcome `want` (a number, "NULL" or "E:<SQLSTATE>") against a value
// that is_null or raised `fault`.
::testing::AssertionResult Same(const std::string &want, double got, bool is_null, Fault fault) {
  std::string told = fault != Fault::kNone ? std::string("E:") + ddx::dense::Sqlstate(fault) : is_null ? "NULL" : "";
  if (want.rfind("E:", 0) == 0 || want == "NULL" || !told.empty()) {
    if (want == told) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "want " << want << ", got " << (told.empty() ? std::to_string(got) : told);
  }
  double w = Number(want);
  bool same = std::isnan(w) ? std::isnan(got) : (w == got && std::signbit(w) == std::signbit(got));
  if (same) return ::testing::AssertionSuccess();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", got);
  return ::testing::AssertionFailure() << "want " << want << ", got " << buf;
}

TEST(ScalarRules, AsPostgreSQLComputesThem) {
  std::ifstream in(std::string(DDX_FIXTURES_DIR) + "/scalar_cases.tsv");
  ASSERT_TRUE(in.good()) << "test/fixtures/scalar_cases.tsv";
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f = Split(line, '\t');
    ASSERT_EQ(f.size(), 4u) << line;
    const ScalarRule *rule = FindScalarRule(f[0]);
    ASSERT_NE(rule, nullptr) << f[0];
    std::vector<std::string> args = Split(f[1], ','), partials = Split(f[3], ',');
    ASSERT_EQ(args.size(), partials.size()) << line;
    std::vector<double> v(args.size());
    std::unique_ptr<bool[]> null(new bool[args.size()]);
    for (size_t i = 0; i < args.size(); i++) {
      null[i] = args[i] == "NULL";
      v[i] = null[i] ? 0.0 : Number(args[i]);
    }
    Args a{v.data(), null.get(), v.size()};
    Fault fault = Fault::kNone;
    bool is_null = false;
    double y = rule->value(a, &is_null, &fault);
    EXPECT_TRUE(Same(f[2], y, is_null, fault)) << line;
    for (size_t i = 0; i < args.size(); i++) {
      // ("-": the value raised or is NULL, or the rule passes no gradient;
      // a NULL argument's gradient row is NULL, where its partial is 0)
      if (partials[i] == "-" || null[i]) continue;
      ASSERT_NE(rule->partial, nullptr) << line;
      Fault pf = Fault::kNone;
      double p = rule->partial(i, a, y, &pf);
      EXPECT_TRUE(Same(partials[i], p, false, pf)) << line << " (partial " << i << ")";
    }
    cases++;
  }
  EXPECT_GT(cases, 500);
}

// Each partial against a central difference of the value, at random points
// where the rule is smooth (away from 0 for abs, inside (-1, 1) for asin).
TEST(ScalarRules, PartialsAreDerivatives) {
  std::mt19937_64 rng(38);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  for (const ScalarRule *rule : ddx::dense::AllScalarRules()) {
    if (!rule->partial) continue;
    size_t n = rule->arity < 0 ? 3 : static_cast<size_t>(rule->arity);
    for (int trial = 0; trial < 50; trial++) {
      std::vector<double> v(n);
      for (double &x : v) x = u(rng);
      std::string name = rule->name;
      if (name == "ln" || name == "log10" || name == "sqrt" || name == "pow") v[0] = std::fabs(v[0]) + 0.1;
      if (name == "asin" || name == "acos") v[0] *= 0.45;
      if (name == "tan") v[0] *= 0.7;
      if (name == "div") v[1] = v[1] < 0 ? v[1] - 0.5 : v[1] + 0.5;
      if (name == "abs" && std::fabs(v[0]) < 0.01) v[0] = 0.5;
      std::unique_ptr<bool[]> null(new bool[n]());
      Args a{v.data(), null.get(), n};
      Fault f = Fault::kNone;
      bool is_null = false;
      double y = rule->value(a, &is_null, &f);
      for (size_t i = 0; i < n; i++) {
        const double h = 1e-6;
        std::vector<double> up = v, down = v;
        up[i] += h;
        down[i] -= h;
        Args au{up.data(), null.get(), n}, ad{down.data(), null.get(), n};
        double fd = (rule->value(au, &is_null, &f) - rule->value(ad, &is_null, &f)) / (2 * h);
        double p = rule->partial(i, a, y, &f);
        EXPECT_NEAR(p, fd, 1e-6 * (1 + std::fabs(fd))) << name << " partial " << i << " at " << v[0];
      }
      EXPECT_EQ(f, Fault::kNone) << name;
    }
  }
}

// Every rule of the core (src/core/rules.cpp) has its numeric form, of the
// same arity, passing a gradient exactly where the SQL rule does.
TEST(ScalarRules, OneForEveryRuleOfTheCore) {
  EXPECT_EQ(ddx::dense::AllScalarRules().size(), ddx::AllRules().size());
  for (const ddx::Rule *r : ddx::AllRules()) {
    const ScalarRule *s = FindScalarRule(r->name);
    ASSERT_NE(s, nullptr) << r->name;
    EXPECT_EQ(s->arity, r->arity) << r->name;
    EXPECT_EQ(s->skips_nulls, r->skips_nulls) << r->name;
    EXPECT_EQ(s->partial == nullptr, r->partial == nullptr) << r->name;
  }
}

TEST(ScalarRules, FaultsAsPostgreSQLReportsThem) {
  EXPECT_STREQ(ddx::dense::Sqlstate(Fault::kDivisionByZero), "22012");
  EXPECT_STREQ(ddx::dense::Message(Fault::kUnderflow), "value out of range: underflow");
  EXPECT_STREQ(ddx::dense::Sqlstate(Fault::kLogOfNegative), "2201E");
  EXPECT_STREQ(ddx::dense::Sqlstate(Fault::kNegativeToNonInteger), "2201F");
}

}  // namespace
