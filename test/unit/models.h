// Test helper: the small models that several unit tests build (with the
// builders of ir_build.h) and vary.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ddx/core/ir.h"
#include "ddx/core/ir_build.h"

namespace ddx {

// x(s, f, val) JOIN w(f, val) ON x.f = w.f; xparam, wparam: the val
// columns' parameter indexes (-1: none).
inline RelP XJoinW(int xparam, int wparam, std::vector<bool> x_notnull = {}) {
  RelP x = MakeScan("public.x", {"s", "f", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, xparam});
  x->notnull = std::move(x_notnull);
  RelP w = MakeScan("public.w", {"f", "val"}, {kInt4, kFloat8}, {-1, wparam});
  return MakeJoin(x, w, JoinKind::Inner, MakeOpaque("($1 = $2)", {MakeCol(1, 0, kInt4), MakeCol(3, 0, kInt4)}, kBool));
}

// SELECT key, sum(value) FROM in GROUP BY key
inline RelP SumBy(const RelP &in, ExprP key, ExprP value) {
  Type kt = key->type;
  return MakeAggregate(MakeProject(in, {std::move(key), std::move(value)}), 1, {{"sum", 1}}, {kt, kFloat8});
}

// SELECT sum(c * c) FROM in
inline RelP SumOfSquares(const RelP &in, int c) {
  return MakeAggregate(MakeProject(in, {MakeCall("mul", {MakeCol(c, 0, kFloat8), MakeCol(c, 0, kFloat8)}, kFloat8)}), 0,
                       {{"sum", 0}}, {kFloat8});
}

// pred = SELECT x.s, sum(x.val * w.val) FROM x JOIN w ON x.f = w.f GROUP BY x.s
// loss = SELECT sum(pred.z * pred.z) FROM pred
inline RelP LinearLoss() {
  return SumOfSquares(SumBy(XJoinW(-1, 0), MakeCol(0, 0, kInt4),
                            MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8)),
                      1);
}

// Every scan a Citus table, as the translator marks one: a parameter table's
// rows keyed by its first column.
inline void MarkCitus(const RelP &r) {
  if (r->kind == RelKind::Scan) {
    r->citus = true;
    bool param = false;
    for (int k : r->param) param = param || k >= 0;
    if (param) r->identity = {r->names.at(0)};
  }
  for (auto &in : r->inputs) MarkCitus(in);
}

}  // namespace ddx
