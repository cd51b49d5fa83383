// The scalar rule registry: every rule's forward and partials are valid
// SQL, and each partial reads what its rule says it reads.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ddx/core/rules.h"
#include "sql_parses.h"

namespace ddx {
namespace {

TEST(Rules, RegistryFindsEveryRuleByName) {
  for (const Rule *r : AllRules()) EXPECT_EQ(FindRule(r->name), r) << r->name;
  EXPECT_EQ(FindRule("no_such_rule"), nullptr);
}

TEST(Rules, ForwardAndPartialsParse) {
  for (const Rule *r : AllRules()) {
    size_t n = r->arity < 0 ? 3 : static_cast<size_t>(r->arity);
    std::vector<std::string> a;
    for (size_t i = 0; i < n; i++) a.push_back("(t.c" + std::to_string(i) + ")::float8");
    std::string y = "(" + r->emit(a, "pg_catalog.float8") + ")::float8";
    EXPECT_EQ(ParseError("SELECT " + r->emit(a, "pg_catalog.float8") + " FROM t"), "") << r->name;
    if (!r->partial) continue;
    for (size_t i = 0; i < n; i++) {
      std::string p = r->partial(i, a, y);
      EXPECT_EQ(ParseError("SELECT " + p + " FROM t"), "") << r->name << " partial " << i << ": " << p;
    }
  }
}

// What the engine reads from Rule::reads (whether to compute the result,
// whether a leaf's adjoint reads the leaf) is what each partial's text reads.
TEST(Rules, PartialsReadWhatTheirRuleSays) {
  for (const Rule *r : AllRules()) {
    EXPECT_EQ(r->reads == nullptr, r->partial == nullptr) << r->name;
    if (!r->partial) continue;
    size_t n = r->arity < 0 ? 3 : static_cast<size_t>(r->arity);
    std::vector<std::string> a;
    for (size_t j = 0; j < n; j++) a.push_back("[a" + std::to_string(j) + "]");
    for (size_t i = 0; i < n; i++) {
      std::string p = r->partial(i, a, "[y]");
      EXPECT_EQ(p.find("[y]") != std::string::npos, r->reads(i, kResult)) << r->name << " partial " << i << ": " << p;
      for (size_t j = 0; j < n; j++)
        EXPECT_EQ(p.find(a[j]) != std::string::npos, r->reads(i, j))
            << r->name << " partial " << i << ", argument " << j << ": " << p;
    }
  }
}

TEST(Rules, StopGradientHasNoPartial) {
  ASSERT_NE(FindRule("stop_gradient"), nullptr);
  EXPECT_EQ(FindRule("stop_gradient")->partial, nullptr);
}

// PostgreSQL raises on float division by zero; derivatives at such points
// must be guarded (sqrt at 0 is +Infinity, as in PyTorch).
TEST(Rules, DivisionsInPartialsAreGuarded) {
  for (const char *name : {"sqrt", "ln", "log10", "div", "asin", "acos"}) {
    const Rule *r = FindRule(name);
    ASSERT_NE(r, nullptr);
    std::vector<std::string> a(r->arity, "x");
    for (int i = 0; i < r->arity; i++) {
      std::string p = r->partial(i, a, "y");
      if (p.find('/') != std::string::npos) {
        EXPECT_NE(p.find("= 0 THEN"), std::string::npos) << name << ": " << p;
      }
    }
  }
}

}  // namespace
}  // namespace ddx
