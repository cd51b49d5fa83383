// What the rules ask of expressions: their columns, leaves, whether they are
// costly, strict, active; names and SQL text helpers (see pass.h).
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "ddx/core/rules.h"
#include "pass.h"

namespace ddx::core {

// An SQL string literal.
std::string Quote(const std::string &s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

std::string Join(const std::vector<std::string> &v, const std::string &sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); i++) s += (i ? sep : "") + v[i];
  return s;
}

[[noreturn]] void Internal(const std::string &what) {
  throw Error(sqlstate::kInternalError, "ddx internal error: " + what);
}

bool ContainsVolatile(const ExprP &e) {
  if (!e) return false;
  if (e->is_volatile) return true;
  for (const auto &a : e->args)
    if (ContainsVolatile(a)) return true;
  return ContainsVolatile(e->test) || ContainsVolatile(e->corr);
}

size_t ExprSize(const ExprP &e) {
  if (!e) return 0;
  size_t n = 1;
  for (const auto &a : e->args) n += ExprSize(a);
  return n + ExprSize(e->test) + ExprSize(e->corr);
}

// e with every side-0 column j replaced by cols[j].
ExprP Substitute(const ExprP &e, const std::vector<ExprP> &cols) {
  if (!e) return e;
  if (e->kind == ExprKind::Col) return e->side == 0 ? cols.at(e->col) : e;
  if (e->args.empty() && !e->test && !e->corr) return e;
  auto c = std::make_shared<Expr>(*e);
  for (auto &a : c->args) a = Substitute(a, cols);
  c->test = Substitute(e->test, cols);
  c->corr = Substitute(e->corr, cols);
  return c;
}

void CollectCols(const ExprP &e, std::set<std::pair<int, int>> &out) {
  if (!e) return;
  if (e->kind == ExprKind::Col && e->side >= kLeafSide) out.insert({e->side, e->col});
  for (const auto &a : e->args) CollectCols(a, out);
  CollectCols(e->test, out);
  CollectCols(e->corr, out);
}

bool IsBoolType(const Type &t) { return t.sql == "pg_catalog.bool" || t.sql == "boolean"; }

std::set<int> LeafSides(const ExprP &e) {
  std::set<std::pair<int, int>> cols;
  CollectCols(e, cols);
  std::set<int> sides;
  for (const auto &c : cols) sides.insert(c.first);
  return sides;
}

bool HasSublink(const ExprP &e) {
  if (!e) return false;
  if (e->kind == ExprKind::Sublink) return true;
  for (const auto &a : e->args)
    if (HasSublink(a)) return true;
  return false;
}

bool ReadsColumns(const ExprP &e) {
  if (!e) return false;
  if (e->kind == ExprKind::Col || e->kind == ExprKind::Sublink) return true;
  for (const auto &a : e->args)
    if (ReadsColumns(a)) return true;
  return false;
}

// An operation worth a column of its own: not a few arithmetic steps.
bool Costly(const ExprP &e) {
  static const std::set<std::string> kCheap{"add",  "sub", "mul",      "neg",   "pos",
                                            "cast", "abs", "greatest", "least", "stop_gradient"};
  if (e->kind != ExprKind::Call || !ReadsColumns(e) || kCheap.count(e->text)) return false;
  return !(e->text == "div" && !ReadsColumns(e->args[1]));
}

// A costly value that reads only (and some of) the leaves `sides`.
bool Movable(const ExprP &e, const std::set<int> &sides) {
  if (!Costly(e) || ContainsVolatile(e) || HasSublink(e)) return false;
  std::set<int> ls = LeafSides(e);
  for (int x : ls)
    if (!sides.count(x)) return false;
  return !ls.empty();
}

// The equalities (both ways round) among the top-level conjuncts of conds.
std::vector<std::pair<ExprP, ExprP>> Equalities(const std::vector<ExprP> &conds) {
  std::vector<std::pair<ExprP, ExprP>> eqs;
  for (const auto &e : Conjuncts(conds))
    if (e->kind == ExprKind::Opaque && (e->name == "=" || e->text == "($1 OPERATOR(pg_catalog.=) $2)") &&
        e->args.size() == 2) {
      eqs.push_back({e->args[0], e->args[1]});
      eqs.push_back({e->args[1], e->args[0]});
    }
  return eqs;
}

// The top-level conjuncts of conds.
std::vector<ExprP> Conjuncts(const std::vector<ExprP> &conds) {
  std::vector<ExprP> out;
  std::function<void(const ExprP &)> conj = [&](const ExprP &e) {
    if (e && e->kind == ExprKind::Opaque && e->name == "AND")
      for (const auto &a : e->args) conj(a);
    else if (e)
      out.push_back(e);
  };
  for (const auto &c : conds) conj(c);
  return out;
}

// Types whose equality is identity: values that = cannot tell apart are the
// same value for every operation (unlike numeric 1.0 and 1.00, float 0 and
// -0, or text under a nondeterministic collation), so a value can stand for
// every row it equals.
bool IdentityEq(const Type &t) {
  static const std::set<std::string> kTypes{"integer",         "bigint",          "smallint", "pg_catalog.int4",
                                            "pg_catalog.int8", "pg_catalog.int2", "boolean",  "pg_catalog.bool"};
  return kTypes.count(t.sql) > 0;
}

// Whether e is NULL exactly when a column it reads is NULL (every operation
// on the way is strict, no constant is NULL); collects those columns.
bool StrictIn(const ExprP &e, std::set<std::pair<int, int>> &cols) {
  switch (e->kind) {
    case ExprKind::Col:
      cols.insert({e->side, e->col});
      return true;
    case ExprKind::Const:
      return e->text.find("NULL") == std::string::npos;
    case ExprKind::Call:
      if (e->text == "greatest" || e->text == "least") return false;
      break;
    case ExprKind::Opaque:
      if (!e->strict) return false;
      break;
    default:
      return false;
  }
  for (const auto &a : e->args)
    if (!StrictIn(a, cols)) return false;
  return true;
}

bool MinAble(const ExprP &e) {
  if (!e) return true;
  if (e->kind == ExprKind::Col) {
    static const std::set<std::string> kOk{"pg_catalog.float8",
                                           "pg_catalog.float4",
                                           "pg_catalog.int4",
                                           "pg_catalog.int8",
                                           "pg_catalog.int2",
                                           "numeric",
                                           "pg_catalog.numeric",
                                           "integer",
                                           "bigint",
                                           "smallint",
                                           "text",
                                           "pg_catalog.text"};
    return kOk.count(e->type.sql) > 0;
  }
  for (const auto &a : e->args)
    if (!MinAble(a)) return false;
  return true;
}

// Factor i of product e may be deferred: it is computed (not a bare
// column), min() can carry the columns it reads, and its leaves and the
// other factor's are disjoint.
bool Deferrable(const ExprP &e, size_t i) {
  const ExprP &x = e->args[i], &y = e->args[1 - i];
  if (x->kind == ExprKind::Col || HasSublink(x) || HasSublink(y) || !MinAble(x)) return false;
  std::set<int> lx = LeafSides(x), ly = LeafSides(y);
  if (lx.empty() || ly.empty()) return false;
  for (int l : lx)
    if (ly.count(l)) return false;
  return true;
}

void CheckVolatile(const ExprP &e) {
  if (ContainsVolatile(e))
    throw Error(sqlstate::kFeatureNotSupported, "volatile function on the gradient path",
                "A volatile function would be evaluated again by the backward pass and see other values.",
                "Compute its values into a table first.");
}

bool IsActive(const ExprP &e, const ActiveFn &act) {
  if (!e || !e->type.differentiable) return false;
  switch (e->kind) {
    case ExprKind::Col:
      return e->side != 1 && act(e->side, e->col);
    case ExprKind::Const:
    case ExprKind::Sublink:
      return false;
    case ExprKind::Call:
      if (const Rule *rule = FindRule(e->text); rule && !rule->partial) return false;  // passes no gradient
      for (const auto &a : e->args)
        if (IsActive(a, act)) return true;
      return false;
    case ExprKind::Case:
      for (size_t k = 1; k < e->args.size(); k += 2)
        if (IsActive(e->args[k], act)) return true;
      return IsActive(e->args.back(), act);
    case ExprKind::Opaque:
      for (const auto &a : e->args)
        if (IsActive(a, act) || (a->kind != ExprKind::Const && !a->type.differentiable && IsActiveAny(a, act)))
          return true;
      return false;
  }
  return false;
}

bool IsActiveAny(const ExprP &e, const ActiveFn &act) {
  if (!e) return false;
  if (e->kind == ExprKind::Col) return e->side != 1 && act(e->side, e->col);
  for (const auto &a : e->args)
    if (IsActiveAny(a, act)) return true;
  return false;
}

std::string F8(const std::string &sql, const Type &t) {
  return t.sql == "pg_catalog.float8" ? sql : "(" + sql + ")::float8";
}

}  // namespace ddx::core
