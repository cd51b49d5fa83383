// Aggregates of a grouped Query: FILTER, and the spreads var_* and stddev_*
// (see internal.h).
#include "internal.h"

namespace ddx::pg {

// An aggregate's argument under FILTER (WHERE cond): CASE WHEN cond THEN arg
// END, which every aggregate ddx differentiates skips where it is NULL
// (count(*) FILTER counts CASE WHEN cond THEN 1 END).
ExprP Filtered(const ExprP &cond, const ExprP &arg) {
  ExprP value = arg ? arg : MakeConst("1", kInt4);
  return MakeCase({cond, value, NullOf(value->type)}, value->type);
}

// The value of an aggregate call after aggregation (see AggOut), its
// columns on `side`.
ExprP AggValue(const AggOut &o, int side) {
  if (o.form == Spread::None) return MakeCol(o.col, side, o.type);
  ExprP var = MakeCol(o.col, side, kFloat8);
  if (o.form == Spread::Sample) {  // Σ / (n - 1), NULL for fewer than two values
    ExprP n = MakeCol(o.count, side, kInt8);
    var =
        MakeCase({MakeOpaque("($1 > 1)", ">", {n}, kBool),
                  MakeCall("div", {var, MakeOpaque("CAST(($1 - 1) AS pg_catalog.float8)", "-", {n}, kFloat8)}, kFloat8),
                  NullOf(kFloat8)},
                 kFloat8);
  }
  return o.root ? MakeCall("sqrt", {var}, kFloat8) : var;
}

// An aggregate call of a grouped query (see AggPlan): FILTER becomes part of
// its argument; var_*, stddev_* and their aliases over float4 or float8 are
// spreads about the group's mean (see Spread).
Translator::AggPlan Translator::PlanAggregate(Aggref *ar, const Ctx &c) {
  FuncInfo fi = Func(ar->aggfnoid);
  if (ar->agglevelsup > 0) Refuse("outer-level aggregate in the loss");
  if (ar->aggdistinct || ar->aggorder || ar->aggkind != AGGKIND_NORMAL)
    Refuse("aggregate " + fi.name + " with DISTINCT, ORDER BY or WITHIN GROUP in the loss");
  AggPlan pl;
  pl.type = MakeType(ar->aggtype, -1);
  pl.fn = fi.builtin && IsAggregateName(fi.name) ? fi.name : fi.qualified;
  if (!fi.builtin) NoteOpaque("aggregate " + fi.qualified + "()");
  if (!ar->aggstar) {
    if (list_length(ar->args) != 1) Refuse("aggregate " + fi.name + " of several arguments in the loss");
    pl.arg = Expr((Node *)linitial_node(TargetEntry, ar->args)->expr, c);
  }
  if (ar->aggfilter) {
    pl.arg = Filtered(Expr((Node *)ar->aggfilter, c), pl.arg);
    if (ar->aggstar) pl.fn = "count";
  }
  static const struct {
    const char *name;
    Spread spread;
    bool root;
  } kSpreads[] = {{"var_pop", Spread::Population, false}, {"var_samp", Spread::Sample, false},
                  {"variance", Spread::Sample, false},    {"stddev_pop", Spread::Population, true},
                  {"stddev_samp", Spread::Sample, true},  {"stddev", Spread::Sample, true}};
  bool floats = pl.arg && (pl.arg->type.sql == "pg_catalog.float8" || pl.arg->type.sql == "pg_catalog.float4");
  for (const auto &k : kSpreads)
    if (fi.builtin && floats && fi.name == k.name) {
      pl.spread = k.spread;
      pl.root = k.root;
      if (pl.arg->type.sql == "pg_catalog.float4") pl.arg = MakeCall("cast", {pl.arg}, kFloat8);
    }
  return pl;
}

// The aggregation of a grouped level over its rows `rel` (after WHERE):
// GROUP BY `groups`, the aggregate calls `aggrefs` (collected from its
// target list and HAVING, PlanAggregate); `outs` gets each call's value
// after it (AggOut). var_* and stddev_* read their group's mean, joined to
// each row first (the group's avg, as a whole-partition window is).
RelP Translator::Aggregate(RelP rel, const std::vector<Node *> &groups, const std::vector<Node *> &aggrefs,
                           const Ctx &c, std::vector<AggOut> &outs) {
  std::vector<ExprP> pre_exprs;
  for (Node *g : groups) pre_exprs.push_back(Expr(g, c));
  std::vector<AggPlan> plans;
  for (Node *n : aggrefs) plans.push_back(PlanAggregate(castNode(Aggref, n), c));
  // var_* and stddev_* read their group's mean, joined to each row first
  // (the group's avg, as a whole-partition window is)
  std::vector<int> mean_col(plans.size(), -1);
  RelP means = NewRel(RelKind::Aggregate);
  means->nkeys = static_cast<int>(groups.size());
  std::vector<ExprP> means_in(pre_exprs.begin(), pre_exprs.end());
  for (Node *g : groups) means->cols.push_back(ExprTypeOf(g));
  for (size_t i = 0; i < plans.size(); i++) {
    if (plans[i].spread == Spread::None) continue;
    mean_col[i] = static_cast<int>(rel->cols.size() + means->cols.size());
    means->aggs.push_back(AggCall{"avg", static_cast<int>(means_in.size())});
    means_in.push_back(plans[i].arg);
    means->cols.push_back(kFloat8);
  }
  if (!means->aggs.empty()) {
    means->inputs = {MakeProject(rel, means_in)};
    int nrel = static_cast<int>(rel->cols.size());
    std::vector<ExprP> on;
    for (int k = 0; k < means->nkeys; k++)
      on.push_back(NullSafeEquals(pre_exprs[k], MakeCol(nrel + k, 0, means->cols[k])));
    rel = MakeJoin(rel, means, JoinKind::Inner, AndAll(on));
  }
  RelP agg = NewRel(RelKind::Aggregate);
  agg->nkeys = static_cast<int>(groups.size());
  for (Node *g : groups) agg->cols.push_back(ExprTypeOf(g));
  auto add = [&](const std::string &fn, const ExprP &arg, const Type &t) {
    AggCall call{fn, -1};
    if (arg) {
      call.arg = static_cast<int>(pre_exprs.size());
      pre_exprs.push_back(arg);
    }
    agg->aggs.push_back(call);
    agg->cols.push_back(t);
    return static_cast<int>(agg->cols.size()) - 1;
  };
  for (size_t i = 0; i < plans.size(); i++) {
    const AggPlan &pl = plans[i];
    AggOut o;
    o.type = pl.type;
    if (pl.spread == Spread::None) {
      o.col = add(pl.fn, pl.arg, pl.type);
    } else {
      // Σ (x - mean)² over the group's rows where x is not NULL
      ExprP dev = MakeCall("sub", {pl.arg, MakeCol(mean_col[i], 0, kFloat8)}, kFloat8);
      ExprP sq = MakeCall("mul", {dev, dev}, kFloat8);
      o.form = pl.spread;
      o.root = pl.root;
      if (pl.spread == Spread::Population) {
        o.col = add("avg", sq, kFloat8);
      } else {
        o.col = add("sum", sq, kFloat8);
        o.count = add("count", pl.arg, kInt8);
      }
    }
    outs.push_back(o);
  }
  agg->inputs = {MakeProject(rel, pre_exprs)};
  return agg;
}

}  // namespace ddx::pg
