// GROUP BY (and DISTINCT) with sum, avg, count, min and max over the input's
// region. Its reverse recomputes the region and pairs each row with its
// group's cotangent; a sum over a join of two sides is transposed instead
// (contraction.cpp).
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../lets.h"
#include "../pass.h"
#include "contraction.h"

namespace ddx::core {
namespace {

std::vector<bool> AggregateRanks(const Rel &r, const Inputs &in, const RankCheck &check) {
  std::vector<bool> rk(r.cols.size(), false);
  for (int k = 0; k < r.nkeys; k++) rk[k] = in(0)[k];
  for (const auto &a : r.aggs)
    if (a.arg >= 0 && in(0)[a.arg] && FlowOf(a.fn) != AggFlow::None) check.refuse("in the aggregate " + a.fn + "()");
  return rk;
}

std::vector<bool> AggregateNotNull(const Rel &r, const Inputs &in) {
  std::vector<bool> nn(r.cols.size(), false);
  for (int k = 0; k < r.nkeys; k++) nn[k] = in(0)[k];
  for (size_t k = 0; k < r.aggs.size(); k++) {
    const AggRule *rule = FindAggRule(r.aggs[k].fn);
    nn[r.nkeys + k] = rule && rule->never_null;
  }
  return nn;
}

std::vector<bool> AggregateActivity(const Rel &r, const Inputs &in) {
  std::vector<bool> act(r.cols.size(), false);
  const auto &i0 = in(0);
  for (int k = 0; k < r.nkeys; k++) act[k] = i0[k];
  for (size_t k = 0; k < r.aggs.size(); k++) {
    const AggCall &a = r.aggs[k];
    act[r.nkeys + k] = a.arg >= 0 && PassesGradient(a.fn) && i0[a.arg] && r.cols[r.nkeys + k].differentiable;
  }
  return act;
}

// A group's rid: its keys, where they are one or two integers, as a value
// no other group has. One integer that cannot be NULL (a Citus table's
// distribution column among them, translate.cpp) is its own rid, as it is:
// Citus sees its joins on rid as joins on the distribution column and keeps
// them on the workers. One nullable smallint or integer is widened (NULL a
// bigint no integer is, 2^32); two of smallint or integer that cannot be
// NULL are k0 * 2^32 + (k1 + 2^31 + 40503 k0) mod 2^32: k0 above, k1 below,
// shifted by a multiple of k0 (for each k0 a bijection of k1, so the rid is
// unique), because PostgreSQL's hashint8 folds the halves by XOR: with k1 + 2^31
// below, the 32,896 rids of a 256-position causal attention had 256 hashes
// and a GROUP BY of them spilled 6,681 times on 17 and 18 (bench/RESULTS.md,
// 'By PostgreSQL major'). In place on Citus, two integers that
// cannot be NULL, a bigint among them (a hidden layer per sample and unit,
// the sample's id a bigint), are k0 * 2^64 + (k1 + 2^63), a numeric: each
// row computes it from its keys, so the layer stays on the workers, where
// row_number() would have it gathered on the coordinator, moving far more
// bytes. Otherwise row_number(), a window over the groups: a pass of its own
// over every group (the matmul's 80k, a visible part of its contraction),
// which Citus computes only on the coordinator, and whose numbering depends
// on the order the groups come in (so its step is always stored:
// graph.cpp). Both costs are measured in bench/RESULTS.md, 'Figures from
// code comments'. Rids are only ever compared for equality, with rids of
// the same relation, so that one relation's rids may be numeric and
// another's bigint. No keys: the one row is 1.
enum class RidForm { Constant, Key, Widened, Packed, PackedWide, Numbered };
RidForm RidFormOf(const Pass &p, const Rel &r) {
  if (r.nkeys == 0) return RidForm::Constant;
  auto small = [](const std::string &t) {
    return t == "integer" || t == "pg_catalog.int4" || t == "smallint" || t == "pg_catalog.int2";
  };
  auto big = [](const std::string &t) { return t == "bigint" || t == "pg_catalog.int8"; };
  auto notnull = [&](int k) { return p.notnull.at(r.inputs[0].get())[k]; };
  const std::string t0 = r.cols[0].sql;
  if (r.nkeys == 1 && (small(t0) || big(t0)) && notnull(0)) return RidForm::Key;
  if (r.nkeys == 1 && small(t0)) return RidForm::Widened;
  if (r.nkeys == 2 && small(t0) && small(r.cols[1].sql) && notnull(0) && notnull(1)) return RidForm::Packed;
  if (p.citus_in_place && r.nkeys == 2 && (small(t0) || big(t0)) && (small(r.cols[1].sql) || big(r.cols[1].sql)) &&
      notnull(0) && notnull(1))
    return RidForm::PackedWide;
  return RidForm::Numbered;
}
std::string KeysRid(const Pass &p, const Rel &r, const std::vector<std::string> &ksql) {
  switch (RidFormOf(p, r)) {
    case RidForm::Constant:
      return "1::bigint";
    case RidForm::Key:
      return "(" + ksql[0] + ")";
    case RidForm::Widened:
      return "COALESCE(CAST(" + ksql[0] + " AS pg_catalog.int8), 4294967296)";
    case RidForm::Packed:
      return "(CAST(" + ksql[0] + " AS pg_catalog.int8) * 4294967296 + ((CAST(" + ksql[1] +
             " AS pg_catalog.int8) + 2147483648 + CAST(" + ksql[0] +
             " AS pg_catalog.int8) * 40503) % 4294967296 + 4294967296) % 4294967296)";
    case RidForm::PackedWide:
      return "(CAST(" + ksql[0] + " AS pg_catalog.numeric) * 18446744073709551616 + (CAST(" + ksql[1] +
             " AS pg_catalog.numeric) + 9223372036854775808))";
    case RidForm::Numbered:
      break;
  }
  return "row_number() OVER ()";
}

// The input region's rows grouped (a costly value below a join computed
// before it: see BelowSides), each group's count beside an avg.
std::string AggregateForward(const Pass &p, const Rel &rel) {
  const Rel *r = &rel;
  std::string sql;
  const Region &reg = p.regions.at(r);
  Resolver res = [&](int side, int col) { return p.LeafCol(reg, side, col); };
  std::vector<ExprP> ecols = reg.item.cols;
  std::string from = p.FromWhere(reg);
  std::vector<ExprP> read(ecols.begin(), ecols.begin() + r->nkeys);
  for (const auto &a : r->aggs)
    if (a.arg >= 0) read.push_back(ecols[a.arg]);
  std::set<int> below = BelowSides(reg, read);
  if (!below.empty()) {  // see BelowSides
    std::vector<std::string> defs;
    std::map<std::string, std::string> names;
    std::set<std::pair<int, int>> used;
    for (auto &e : ecols) e = p.Hoist(reg, e, below, defs, names);
    for (int k = 0; k < r->nkeys; k++) CollectCols(ecols[k], used);
    for (const auto &a : r->aggs)
      if (a.arg >= 0) CollectCols(ecols[a.arg], used);
    from = p.SplitFrom(reg, below, used, defs, [](const std::string &sub) { return sub + " s"; });
    res = p.Above(reg, below);
  }
  std::vector<std::string> cols, keys;
  std::vector<std::string> ksql;
  for (int k = 0; k < r->nkeys; k++) ksql.push_back(p.Sql(ecols[k], res));
  cols.push_back(KeysRid(p, *r, ksql) + " AS rid");
  for (int k = 0; k < r->nkeys; k++) {
    cols.push_back(p.Sql(ecols[k], res) + " AS " + C(k));
    keys.push_back(std::to_string(k + 2));  // select-list position
  }
  for (size_t k = 0; k < r->aggs.size(); k++) {
    const AggCall &a = r->aggs[k];
    std::string arg = a.arg < 0 ? "*" : p.Sql(ecols[a.arg], res);
    cols.push_back(a.fn + "(" + arg + ") AS " + C(r->nkeys + static_cast<int>(k)));
    if (Counted(a.fn)) cols.push_back("count(" + arg + ") AS n" + std::to_string(k));
  }
  sql = "SELECT " + Join(cols, ", ") + " FROM " + from;
  if (!keys.empty()) sql += " GROUP BY " + Join(keys, ", ");
  return sql;
}

// The adjoint of aggregate call k's argument in a row of the region: d
// (its group's cotangent) through the aggregate, NULL where the row is not
// in the aggregate.
std::string AggregateAdjoint(const Pass &p, const Rel &r, const Region &reg, int k, const std::string &d, Lets &lets) {
  const AggCall &ag = r.aggs[k];
  const ExprP &arg = reg.item.cols[ag.arg];
  Resolver res = [&](int side, int col) { return "r." + FlatName(reg, side, col); };
  std::string y = "a." + C(r.nkeys + k), adj;
  AggFlow flow = FlowOf(ag.fn);
  if (flow == AggFlow::Linear) {
    // A row whose argument is NULL is not in the sum: its adjoint is NULL.
    // Where the argument is NULL exactly when a column it reads is
    // (StrictIn), those columns are tested, not the argument's value,
    // which the backward then computes only where its derivative reads it
    // (the matmul's sum(power(tanh(z), 2)) read z's tanh, not its square:
    // one layer of 80k rows fewer); where none of them can be NULL, there
    // is nothing to test.
    std::set<std::pair<int, int>> cols;
    std::vector<std::string> nulls;
    bool strict = StrictIn(arg, cols);
    for (const auto &[side, col] : cols)
      if (side < kLeafSide || col < 0 || !p.notnull.at(reg.leaves[side - kLeafSide])[col])
        nulls.push_back(res(side, col) + " IS NULL");
    std::string isnull = strict ? Join(nulls, " OR ") : "(" + lets.Value(arg, "") + ") IS NULL";
    std::string val = Counted(ag.fn) ? d + " / a.n" + std::to_string(k) : d;
    adj = isnull.empty() ? "(" + val + ")" : "(CASE WHEN " + isnull + " THEN NULL ELSE " + val + " END)";
  } else if (flow == AggFlow::Attained) {
    std::string x = lets.Value(arg, "");
    // Tied rows share the gradient evenly.
    adj = "(CASE WHEN (" + x + ") = " + y + " THEN " + d + " / count(*) FILTER (WHERE (" + x + ") = " + y +
          ") OVER (PARTITION BY a.rid) END)";
  } else {
    throw Error(sqlstate::kFeatureNotSupported, "aggregate " + ag.fn + " has no derivative rule",
                "Gradient reaches an aggregate that ddx does not differentiate.",
                "Use sum, avg, min or max, or wrap its argument in stop_gradient(...).");
  }
  return adj;
}

void AggregateReverse(Pass &p, const Rel &rel, Steps &s) {
  const Rel *r = &rel;
  const std::set<int> &bc = p.bcols.at(r);
  std::string b = p.B(r);
  // Recompute the input region, pair each row with its group's cotangent
  // by the group keys, and sum the chain rule by each leaf's rid. The
  // region is planned on its own (OFFSET 0): planned together with the
  // aggregate and its cotangent, whose CTE scans have no statistics, the
  // planner joined the wrong pair first (attention: 1M rows instead of 33k).
  const Region &reg = p.regions.at(r);
  if (Transposed(p, r, reg)) return;
  Resolver inside = [&](int side, int col) { return p.LeafCol(reg, side, col); };
  Resolver res = [&](int side, int col) { return "r." + FlatName(reg, side, col); };
  // The region's rows carry the leaf rids, the leaf columns the keys and
  // the differentiated arguments read, and the keys.
  std::set<std::pair<int, int>> used;
  for (int o : bc) CollectCols(o < r->nkeys ? reg.item.cols[o] : reg.item.cols[r->aggs[o - r->nkeys].arg], used);
  // Each group's saved row and its cotangent, joined first (a few rows
  // per group), so that the region's rows are probed once.
  Refs reads;
  std::string grp = p.Groups(r, reads);
  std::vector<ExprP> read;
  for (int o : bc) read.push_back(o < r->nkeys ? reg.item.cols[o] : reg.item.cols[r->aggs[o - r->nkeys].arg]);
  std::set<int> below = BelowSides(reg, read);  // see BelowSides
  Lets under(
      p, "s", [&](int side, int col) { return "s." + FlatName(reg, side, col); }, "h");
  Lets lets(p, "r", res, "v", below.empty() ? nullptr : &under, below);
  Terms terms;
  std::vector<Deferred> deferred;
  for (int o : bc) {
    std::string d = "a.b" + D(o);
    if (o < r->nkeys) {
      if (!r->distinct)
        throw Error(sqlstate::kFeatureNotSupported, "GROUP BY key depends on a parameter",
                    "A group key carries gradient, but grouping by a value has no derivative.",
                    "Group by columns that do not depend on the parameter, or wrap the key in stop_gradient(...).");
      CheckVolatile(reg.item.cols[o]);
      Backprop(reg.item.cols[o], "(" + d + " / count(*) OVER (PARTITION BY a.rid))", lets, p.LeafActivity(reg), terms);
      continue;
    }
    int k = o - r->nkeys;
    const AggCall &ag = r->aggs[k];
    const ExprP &arg = reg.item.cols[ag.arg];
    CheckVolatile(arg);
    std::string adj = AggregateAdjoint(p, *r, reg, k, d, lets);
    Backprop(arg, adj, lets, p.LeafActivity(reg), terms, "", &deferred);
  }
  // The region's rows carry the leaf rids, the leaf columns the keys and
  // the differentiated arguments read (all of a leaf's whose cotangent
  // carries them, see Carries), and the keys.
  // (several leaves: the one that is the only root, OnlyRoot)
  std::set<int> to;
  for (const auto &[key, t] : terms) to.insert(key.first);
  int carrier = !deferred.empty() ? -1 : to.size() == 1 ? *to.begin() : OnlyRootSide(reg, to);
  if (carrier >= 0 && Carries(reg.leaves[carrier - kLeafSide]))
    for (size_t j = 0; j < reg.leaves[carrier - kLeafSide]->cols.size(); j++)
      used.insert({carrier, static_cast<int>(j)});
  // The keys that go with a leaf's rid (RidKeys), among the rows' columns.
  for (size_t k = 0; k < reg.leaves.size(); k++)
    for (int j : RidKeys(p, reg.leaves[k])) used.insert({kLeafSide + static_cast<int>(k), j});
  Resolver at = below.empty() ? inside : p.Above(reg, below);
  std::vector<std::string> sel;
  for (size_t k = 0; k < reg.leaves.size(); k++)
    sel.push_back(at(kLeafSide + static_cast<int>(k), -1) + " AS " +
                  FlatName(reg, kLeafSide + static_cast<int>(k), -1));
  for (const auto &[side, col] : used)
    if (col >= 0) sel.push_back(at(side, col) + " AS " + FlatName(reg, side, col));
  // The leaf columns the rows have, by name; "" for the others (the leaves
  // whose saved columns a cotangent may carry are found by it: CarriedCols).
  std::set<std::pair<int, int>> selected = used;
  Resolver value = [&res, selected](int side, int col) {
    return col < 0 || selected.count({side, col}) ? res(side, col) : std::string();
  };
  for (int k = 0; k < r->nkeys; k++) {
    for (const auto &c : p.KeyCols(r, k, p.Sql(reg.item.cols[k], at), "k" + std::to_string(k))) sel.push_back(c);
    CollectCols(reg.item.cols[k], used);
  }
  std::string from = p.FromWhere(reg);
  if (!below.empty()) {
    for (const auto &n : under.Names()) sel.push_back("s." + n + " AS " + n);
    from = p.SplitFrom(reg, below, used, {}, [&](const std::string &sub) { return under.Wrap(sub); });
  }
  std::string source = " FROM " + lets.Wrap("(SELECT " + Join(sel, ", ") + " FROM " + from + p.Fence() + ")");
  if (r->nkeys == 0) {
    source += " CROSS JOIN " + grp;
  } else {
    std::vector<std::string> on;
    for (int k = 0; k < r->nkeys; k++) on.push_back(p.KeyEq(r, k, "r.k" + std::to_string(k)));
    source += " JOIN " + grp + " ON " + Join(on, " AND ");
  }
  p.ContributeToLeaves(
      s, reg, source, reads, terms, [&reg](int k) { return "r." + reg.Alias(k) + "_rid"; },
      "m" + std::to_string(p.id.at(r)), deferred, value, {},
      [&](int k) {
        std::vector<std::string> v;
        for (int j : RidKeys(p, reg.leaves[k])) v.push_back(res(kLeafSide + k, j));
        return v;
      });
}

// Forward mode: sum and avg of the tangents (over the rows whose argument
// is not NULL, as the values), min and max the average tangent of the rows
// that attain them (ties share, as in reverse mode), a DISTINCT key's the
// average of its rows'.
std::string AggregateTangent(const Pass &p, const Rel &rel) {
  const Rel *r = &rel;
  const Region &reg = p.regions.at(r);
  Resolver res = p.Inside(reg);
  const std::vector<bool> &act = p.active.at(r);
  std::vector<std::string> inner, keys, by, cols{kTangentRid};
  for (int k = 0; k < r->nkeys; k++) {
    inner.push_back(p.Sql(reg.item.cols[k], res) + " AS " + C(k));
    by.push_back(p.Sql(reg.item.cols[k], res));
    keys.push_back("i." + C(k));
    cols.push_back("i." + C(k) + " AS " + C(k));
  }
  std::string part = by.empty() ? "" : "PARTITION BY " + Join(by, ", ");  // (the groups, among the region's rows)
  std::vector<std::string> tans;
  for (int k = 0; k < r->nkeys; k++) {
    if (!act[k]) continue;
    if (!r->distinct)
      throw Error(sqlstate::kFeatureNotSupported, "GROUP BY key depends on a parameter",
                  "A group key carries a tangent, but grouping by a value has no derivative.",
                  "Group by columns that do not depend on the parameter, or wrap the key in stop_gradient(...).");
    inner.push_back(p.TangentSql(reg, reg.item.cols[k]) + " AS t" + std::to_string(k));
    tans.push_back("avg(i.t" + std::to_string(k) + ") AS t" + std::to_string(k));
  }
  for (size_t k = 0; k < r->aggs.size(); k++) {
    const AggCall &a = r->aggs[k];
    std::string ks = std::to_string(k), o = std::to_string(r->nkeys + static_cast<int>(k));
    if (a.arg >= 0) inner.push_back(p.Sql(reg.item.cols[a.arg], res) + " AS a" + ks);
    cols.push_back(a.fn + "(" + (a.arg < 0 ? std::string("*") : "i.a" + ks) + ") AS c" + o);
    if (!act[r->nkeys + k]) continue;
    const ExprP &arg = reg.item.cols[a.arg];
    CheckVolatile(arg);
    std::string x = p.Sql(arg, res);
    // The rows whose argument is NULL are not in the aggregate: their
    // tangents are left out where the aggregate reads the argument's value
    // beside it (not by computing the argument again inside a CASE).
    inner.push_back(p.TangentSql(reg, arg) + " AS ta" + ks);
    AggFlow flow = FlowOf(a.fn);
    if (flow == AggFlow::Linear) {
      tans.push_back(std::string(Counted(a.fn) ? "avg" : "sum") + "(CASE WHEN i.a" + ks +
                     " IS NULL THEN NULL ELSE i.ta" + ks + " END) AS t" + o);
    } else if (flow == AggFlow::Attained) {  // (a NULL argument never equals the max)
      inner.push_back(a.fn + "(" + x + ") OVER (" + part + ") AS m" + ks);
      tans.push_back("avg(CASE WHEN i.a" + ks + " = i.m" + ks + " THEN i.ta" + ks + " END) AS t" + o);
    } else {
      throw Error(sqlstate::kFeatureNotSupported, "aggregate " + a.fn + " has no derivative rule",
                  "A tangent reaches an aggregate that ddx does not differentiate.",
                  "Use sum, avg, min or max, or wrap its argument in stop_gradient(...).");
    }
  }
  cols.insert(cols.end(), tans.begin(), tans.end());
  if (inner.empty()) inner.push_back("1 AS one");
  return "SELECT " + Join(cols, ", ") + " FROM (SELECT " + Join(inner, ", ") + " FROM " + p.FromWhere(reg) + ") i" +
         (keys.empty() ? "" : " GROUP BY " + Join(keys, ", "));
}

}  // namespace

bool RidOfKeys(const Pass &p, const Rel &r) { return RidFormOf(p, r) != RidForm::Numbered; }

std::vector<int> RidKeys(const Pass &p, const Rel *r) {
  if (!p.citus_in_place || !p.recomputed.count(r) || r->kind != RelKind::Aggregate) return {};
  RidForm form = RidFormOf(p, *r);
  if (form != RidForm::Packed && form != RidForm::PackedWide) return {};
  return {0, 1};
}

std::vector<std::string> KeysInCotangent(const Pass &p, const Rel *r) {
  std::vector<std::string> none, keys{"b.rid AS rid"};
  if (r->kind != RelKind::Aggregate) return none;
  for (int o : p.bcols.at(r))
    if (o >= r->nkeys && (FlowOf(r->aggs[o - r->nkeys].fn) != AggFlow::Linear || Counted(r->aggs[o - r->nkeys].fn)))
      return none;
  switch (RidFormOf(p, *r)) {
    case RidForm::Constant:
      return keys;
    case RidForm::Key:  // (its rid is the key itself, of its type)
      keys.push_back("b.rid AS " + C(0));
      return keys;
    case RidForm::Packed:
    case RidForm::PackedWide: {
      if (!p.keyed.count(r)) return none;
      std::vector<int> js = RidKeys(p, r);
      for (size_t i = 0; i < js.size(); i++) keys.push_back("b.rk" + std::to_string(i) + " AS " + C(js[i]));
      return keys;
    }
    default:
      return none;
  }
}

extern const OpRule kAggregateOp;
const OpRule kAggregateOp{
    "aggregate",      AggregateRanks,   AggregateNotNull, AggregateActivity,
    AggregateForward, AggregateReverse, RegionOf::Input,  AggregateTangent,
};

}  // namespace ddx::core
