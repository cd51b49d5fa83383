// Aggregates of a grouped Query: FILTER, and the spreads var_* and stddev_*
// (see internal.h).
#include "internal.h"

namespace ddx::pg {

// An aggregate's argument under FILTER (WHERE cond): CASE WHEN cond THEN arg
// END, which every aggregate ddx differentiates skips where it is NULL
// (count(*) FILTER counts CASE WHEN cond THEN 1 END).
ExprP Filtered(const ExprP &cond, const ExprP &arg) {
  ExprP value = arg;
  if (!value) {
    auto one = std::make_shared<Expr>();
    one->kind = ExprKind::Const;
    one->type = Type{"pg_catalog.int4", false};
    one->text = "1";
    value = one;
  }
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Case;
  e->type = value->type;
  e->args = {cond, value, NullOf(value->type)};
  return e;
}

// The value of an aggregate call after aggregation (see AggOut), its
// columns on `side`.
ExprP AggValue(const AggOut &o, int side) {
  if (o.form == Spread::None) return MakeCol(o.col, side, o.type);
  ExprP var = MakeCol(o.col, side, kFloat8);
  if (o.form == Spread::Sample) {  // Σ / (n - 1), NULL for fewer than two values
    ExprP n = MakeCol(o.count, side, Type{"pg_catalog.int8", false});
    auto v = std::make_shared<Expr>();
    v->kind = ExprKind::Case;
    v->type = kFloat8;
    v->args = {MakeOpaque("($1 > 1)", ">", {n}, kBool),
               MakeCall("div", {var, MakeOpaque("CAST(($1 - 1) AS pg_catalog.float8)", "-", {n}, kFloat8)}, kFloat8),
               NullOf(kFloat8)};
    var = v;
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

}  // namespace ddx::pg
