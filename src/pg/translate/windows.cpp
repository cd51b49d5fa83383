// Window functions of a Query level (see internal.h).
#include "internal.h"

#include "ddx/pg/compat.h"

namespace ddx::pg {

// Windows. A whole-partition aggregate (no ORDER BY, or a frame spanning the
// partition) becomes the partition's aggregate (GROUP BY the partition keys)
// joined back to each row on the keys: the reverse rules of aggregates and
// joins differentiate it, and its backward is a GROUP BY. Every other window
// (running frames, LAG/LEAD, ranks) becomes a Window relation whose reverse
// rule (program.cpp) runs windows with transposed frames.
namespace {

bool WholePartition(const WindowClause *wc) {
  int o = wc->frameOptions;
  if (o & (FRAMEOPTION_EXCLUDE_CURRENT_ROW | FRAMEOPTION_EXCLUDE_GROUP | FRAMEOPTION_EXCLUDE_TIES)) return false;
  if (!(o & FRAMEOPTION_NONDEFAULT)) return wc->orderClause == NIL;  // default frame: all peers
  if (wc->orderClause == NIL && !(o & FRAMEOPTION_ROWS)) {
    // RANGE/GROUPS without ORDER BY: every row is a peer of every row, so
    // only offsets can narrow the frame.
    return !(o & (FRAMEOPTION_START_OFFSET | FRAMEOPTION_END_OFFSET));
  }
  return (o & FRAMEOPTION_START_UNBOUNDED_PRECEDING) && (o & FRAMEOPTION_END_UNBOUNDED_FOLLOWING);
}

}  // namespace

// Whether n is an aggregate (of pg_catalog) that ddx differentiates.
bool IsAggregateName(const std::string &n) {
  const AggRule *rule = FindAggRule(n);
  return rule && rule->aggregate;
}

// OFFSET 0 without a LIMIT (PostgreSQL's optimization fence, and how jvp's
// tangent query fences its steps): the rows as they are.
bool IdentityOffset(const Query *q) {
  auto null_or_absent = [](Node *n) { return !n || (IsA(n, Const) && castNode(Const, n)->constisnull); };
  if (!null_or_absent(q->limitCount) || q->limitOption != LIMIT_OPTION_COUNT) return false;
  Node *o = q->limitOffset;
  return o && IsA(o, Const) && !castNode(Const, o)->constisnull && castNode(Const, o)->consttype == INT8OID &&
         DatumGetInt64(castNode(Const, o)->constvalue) == 0;
}

std::string OffsetSql(Node *n) {
  if (!n) return "";
  if (!IsA(n, Const)) n = PgCall([&] { return eval_const_expressions(nullptr, n); });
  if (!IsA(n, Const) || castNode(Const, n)->constisnull)
    Refuse("window frame offset or shift that is not a constant in the loss");
  return ConstSql(castNode(Const, n));
}

namespace {

Frame TranslateFrame(const WindowClause *wc) {
  Frame f;
  int o = wc->frameOptions;
  if (!(o & FRAMEOPTION_NONDEFAULT)) {
    f.mode = FrameMode::Range;
    f.start.kind = BoundKind::UnboundedPreceding;
    f.end.kind = wc->orderClause == NIL ? BoundKind::UnboundedFollowing : BoundKind::CurrentRow;
    return f;
  }
  f.mode = (o & FRAMEOPTION_ROWS) ? FrameMode::Rows : (o & FRAMEOPTION_GROUPS) ? FrameMode::Groups : FrameMode::Range;
  auto bound = [&](bool start) {
    FrameBound b;
    int up = start ? FRAMEOPTION_START_UNBOUNDED_PRECEDING : FRAMEOPTION_END_UNBOUNDED_PRECEDING;
    int uf = start ? FRAMEOPTION_START_UNBOUNDED_FOLLOWING : FRAMEOPTION_END_UNBOUNDED_FOLLOWING;
    int cr = start ? FRAMEOPTION_START_CURRENT_ROW : FRAMEOPTION_END_CURRENT_ROW;
    int op = start ? FRAMEOPTION_START_OFFSET_PRECEDING : FRAMEOPTION_END_OFFSET_PRECEDING;
    int of = start ? FRAMEOPTION_START_OFFSET_FOLLOWING : FRAMEOPTION_END_OFFSET_FOLLOWING;
    Node *off = start ? wc->startOffset : wc->endOffset;
    if (o & up)
      b.kind = BoundKind::UnboundedPreceding;
    else if (o & uf)
      b.kind = BoundKind::UnboundedFollowing;
    else if (o & cr)
      b.kind = BoundKind::CurrentRow;
    else if (o & op)
      b.kind = BoundKind::Preceding, b.offset = OffsetSql(off);
    else if (o & of)
      b.kind = BoundKind::Following, b.offset = OffsetSql(off);
    return b;
  };
  f.start = bound(true);
  f.end = bound(false);
  if (o & FRAMEOPTION_EXCLUDE_CURRENT_ROW) f.exclude = "CURRENT ROW";
  if (o & FRAMEOPTION_EXCLUDE_GROUP) f.exclude = "GROUP";
  if (o & FRAMEOPTION_EXCLUDE_TIES) f.exclude = "TIES";
  return f;
}

}  // namespace

SortKey TranslateSortKey(SortGroupClause *sgc, int col) {
  SortKey k;
  k.col = col;
  k.nulls_first = sgc->nulls_first;
  bool ok = false;
  k.desc = PgCall([&] { return compat::OrderingIsDescending(sgc->sortop, &ok); });
  if (!ok) Refuse("ORDER BY with a non-btree operator in the loss");
  return k;
}

// A window call's first argument over the rows (nullptr: count(*)), with
// its FILTER (WHERE ...) made part of it (see Filtered).
ExprP Translator::WindowArg(WindowFunc *f, const Ctx &c) {
  ExprP arg = !f->winstar && list_length(f->args) >= 1 ? Expr((Node *)linitial(f->args), c) : nullptr;
  if (f->aggfilter) arg = Filtered(Expr((Node *)f->aggfilter, c), arg);
  return arg;
}

namespace {

// The window functions of `funcs` over window clause `winref`, each checked
// (one ddx differentiates over a window), with their names; *all_aggregates
// whether every one is an aggregate.
std::vector<WindowFunc *> WindowCalls(const std::vector<WindowFunc *> &funcs, Index winref,
                                      std::vector<std::string> *names, bool *all_aggregates) {
  std::vector<WindowFunc *> mine;
  *all_aggregates = true;
  for (WindowFunc *f : funcs) {
    if (f->winref != winref) continue;
    FuncInfo fi = Func(f->winfnoid);
    if (fi.qualified == "_ddx.max_tangent" || fi.qualified == "_ddx.min_tangent")  // hvp's jvp query
      Refuse("hvp through min or max over a window frame",
             "hvp differentiates the loss's jvp query in reverse mode, which does not take the tangent of a "
             "window min/max.",
             "Use jvp or grad, or an aggregate's min/max.");
    bool builtin = fi.qualified.rfind("pg_catalog.", 0) == 0;
    const AggRule *rule = FindAggRule(fi.name);
    bool known = builtin && rule && (f->winagg ? rule->aggregate : !rule->aggregate);
    if (!known || (f->aggfilter && !f->winagg))
      Refuse("window function " + fi.name + " in the loss",
             "ddx differentiates sum, avg, count, min and max over a window, lag and lead, and row_number, rank "
             "and dense_rank as filters.");
    if (f->winagg && !f->winstar && list_length(f->args) != 1)
      Refuse("window function " + fi.name + " of several arguments in the loss");
    *all_aggregates = *all_aggregates && f->winagg;
    mine.push_back(f);
    names->push_back(fi.name);
  }
  return mine;
}

}  // namespace

RelP Translator::JoinWindows(Query *q, RelP rel, const Ctx &c, std::map<const WindowFunc *, int> &out) {
  std::vector<WindowFunc *> funcs;
  ListCell *lc;
  foreach (lc, q->targetList) CollectWindowFuncs((Node *)lfirst_node(TargetEntry, lc)->expr, &funcs);
  foreach (lc, q->windowClause) {
    auto *wc = lfirst_node(WindowClause, lc);
    std::vector<std::string> names;
    bool all_aggregates;
    std::vector<WindowFunc *> mine = WindowCalls(funcs, wc->winref, &names, &all_aggregates);
    if (mine.empty()) continue;
    std::vector<ExprP> pre;  // the partition keys
    ListCell *lk;
    foreach (lk, wc->partitionClause)
      pre.push_back(Expr((Node *)get_sortgroupclause_expr(lfirst_node(SortGroupClause, lk), q->targetList), c));
    if (all_aggregates && WholePartition(wc))
      rel = PartitionAggregates(rel, std::move(pre), mine, names, c, out);
    else
      rel = WindowOver(q, rel, wc, pre, mine, names, c, out);
  }
  return rel;
}

// rel joined on the partition keys `pre` with the aggregates `mine` of each
// partition (GROUP BY the keys).
RelP Translator::PartitionAggregates(RelP rel, std::vector<ExprP> pre, const std::vector<WindowFunc *> &mine,
                                     const std::vector<std::string> &names, const Ctx &c,
                                     std::map<const WindowFunc *, int> &out) {
  int n = static_cast<int>(rel->cols.size());
  RelP agg = NewRel(RelKind::Aggregate);
  agg->nkeys = static_cast<int>(pre.size());
  for (const auto &k : pre) agg->cols.push_back(k->type);
  for (size_t i = 0; i < mine.size(); i++) {
    AggCall call;
    call.fn = names[i];
    if (ExprP arg = WindowArg(mine[i], c)) {
      if (mine[i]->winstar) call.fn = "count";  // count(*) FILTER (...)
      call.arg = static_cast<int>(pre.size());
      pre.push_back(arg);
    }
    agg->aggs.push_back(call);
    agg->cols.push_back(MakeType(mine[i]->wintype, -1));
  }
  agg->inputs = {MakeProject(rel, pre)};
  std::vector<ExprP> conds;
  for (int k = 0; k < agg->nkeys; k++) conds.push_back(NullSafeEquals(pre[k], MakeCol(n + k, 0, agg->cols[k])));
  for (size_t k = 0; k < mine.size(); k++) out[mine[k]] = n + agg->nkeys + static_cast<int>(k);
  return MakeJoin(rel, agg, JoinKind::Inner, AndAll(conds));
}

// A Window relation of the calls `mine` over window clause wc: its input is
// rel's columns ++ partition keys ++ order keys ++ arguments.
RelP Translator::WindowOver(Query *q, RelP rel, WindowClause *wc, const std::vector<ExprP> &pre,
                            const std::vector<WindowFunc *> &mine, const std::vector<std::string> &names, const Ctx &c,
                            std::map<const WindowFunc *, int> &out) {
  int n = static_cast<int>(rel->cols.size());
  std::vector<ExprP> cols;
  for (int i = 0; i < n; i++) cols.push_back(MakeCol(i, 0, rel->cols[i]));
  RelP w = NewRel(RelKind::Window);
  auto add = [&](const ExprP &e) {
    cols.push_back(e);
    return static_cast<int>(cols.size()) - 1;
  };
  for (const auto &p : pre) w->partition.push_back(add(p));
  ListCell *lk;
  foreach (lk, wc->orderClause) {
    auto *sgc = lfirst_node(SortGroupClause, lk);
    int col = add(Expr((Node *)get_sortgroupclause_expr(sgc, q->targetList), c));
    w->order.push_back(TranslateSortKey(sgc, col));
  }
  w->frame = TranslateFrame(wc);
  for (size_t i = 0; i < mine.size(); i++) {
    WindowFunc *f = mine[i];
    WinCall call;
    call.fn = names[i];
    int nargs = list_length(f->args);
    if (ExprP arg = WindowArg(f, c)) call.arg = add(arg);
    if (nargs >= 2) call.offset = OffsetSql((Node *)lsecond(f->args));
    if (nargs >= 3) call.dflt = add(Expr((Node *)lthird(f->args), c));
    w->wins.push_back(call);
  }
  RelP in = MakeProject(rel, cols);
  w->cols = in->cols;
  for (WindowFunc *f : mine) {
    out[f] = static_cast<int>(w->cols.size());
    w->cols.push_back(MakeType(f->wintype, -1));
  }
  w->inputs = {in};
  return w;
}

}  // namespace ddx::pg
