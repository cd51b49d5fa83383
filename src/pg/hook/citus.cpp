// A statement that calls grad over Citus tables (see internal.h).
#include "internal.h"

#include "ddx/pg/compat.h"

namespace ddx::pg {
namespace {

// Whether a Var of `q` (at `depth` Query levels below it) reads a system
// column or the whole row of q's range-table entry `varno`.
struct RowRefs {
  Index varno;
  Index depth;
  bool found;
};
bool FindRowRef(Node *node, RowRefs *c) {
  if (!node) return false;
  if (IsA(node, Var)) {
    Var *v = castNode(Var, node);
    if (v->varno == static_cast<int>(c->varno) && v->varlevelsup == c->depth && v->varattno <= 0) c->found = true;
    return false;
  }
  if (IsA(node, Query)) {
    c->depth++;
    bool r = query_tree_walker(castNode(Query, node), (bool (*)())FindRowRef, c, 0);
    c->depth--;
    return r;
  }
  return expression_tree_walker(node, (bool (*)())FindRowRef, c);
}

}  // namespace

bool CollectLevels(Node *node, Levels *l) {
  if (!node) return false;
  if (IsA(node, Query)) {
    Query *q = castNode(Query, node);
    if (Query *inner = InnerQuery(q)) return CollectLevels((Node *)inner, l);
    l->queries.push_back(q);
    return query_tree_walker(q, (bool (*)())CollectLevels, l, QTW_EXAMINE_RTES_BEFORE);
  }
  if (IsA(node, RangeTblEntry)) {
    auto *rte = castNode(RangeTblEntry, node);
    if (rte->rtekind == RTE_RELATION) l->relids.push_back(rte->relid);
    return false;
  }
  return expression_tree_walker(node, (bool (*)())CollectLevels, l);
}

namespace {

// A statement that calls grad names its loss as text: the CTEs of its
// model are often read by nothing. PostgreSQL plans no SELECT CTE that
// nothing reads (SS_process_ctes), and so none that only such CTEs read;
// Citus plans a CTE read twice as a subplan of its own and runs it, whoever
// reads it (recursive_planning.c skips only those of no reference at all).
// The MLP whose hidden layer two CTEs read gathered the data, 176 kB of
// 2,000 samples, for a forward no one asked for. So such CTEs are dropped,
// each dropped one's own references then no longer counted; a CTE that
// modifies data stays (it runs whether read or not), as does a recursive
// one.
struct CteUses {
  List *ctes;  // the level's
  int depth = 0;
};
bool UncountCteRefs(Node *node, CteUses *u) {
  if (!node) return false;
  if (IsA(node, Query)) {
    u->depth++;
    bool r = query_tree_walker(castNode(Query, node), (bool (*)())UncountCteRefs, u, QTW_EXAMINE_RTES_BEFORE);
    u->depth--;
    return r;
  }
  if (IsA(node, RangeTblEntry)) {
    auto *rte = castNode(RangeTblEntry, node);
    if (rte->rtekind == RTE_CTE && static_cast<int>(rte->ctelevelsup) == u->depth) {
      ListCell *lc;
      foreach (lc, u->ctes) {
        auto *cte = lfirst_node(CommonTableExpr, lc);
        if (strcmp(cte->ctename, rte->ctename) == 0) cte->cterefcount--;
      }
    }
    return false;
  }
  return expression_tree_walker(node, (bool (*)())UncountCteRefs, u);
}

}  // namespace
void DropUnreadCtes(Query *q) {
  for (bool dropped = true; dropped;) {
    dropped = false;
    ListCell *lc;
    foreach (lc, q->cteList) {
      auto *cte = lfirst_node(CommonTableExpr, lc);
      if (cte->cterefcount > 0 || cte->cterecursive || castNode(Query, cte->ctequery)->commandType != CMD_SELECT)
        continue;
      q->cteList = foreach_delete_current(q->cteList, lc);
      CteUses u{q->cteList};
      UncountCteRefs(cte->ctequery, &u);
      dropped = true;
      break;
    }
  }
}

namespace {

// Whether a relation is a Citus distributed table, or a view that reads one.
// (A view's query names the view itself, as its *OLD* and *NEW* entries.)
bool DistributedRelation(Oid relid, std::vector<Oid> *seen) {
  for (Oid o : *seen)
    if (o == relid) return false;
  seen->push_back(relid);
  if (CitusTableKind(relid) == "distributed table") return true;
  if (PgCall([&] { return get_rel_relkind(relid); }) != RELKIND_VIEW) return false;
  Levels l = PgCall([&] {
    Relation rel = relation_open(relid, AccessShareLock);
    Levels x;
    CollectLevels((Node *)get_view_query(rel), &x);
    relation_close(rel, NoLock);
    return x;
  });
  for (Oid r : l.relids)
    if (DistributedRelation(r, seen)) return true;
  return false;
}
bool DistributedRelation(Oid relid) {
  std::vector<Oid> seen;
  return DistributedRelation(relid, &seen);
}

}  // namespace

// A statement that calls grad, vjp or ddx_value must compute their values
// on the coordinator, where the programs' results are; a Citus statement
// over a distributed table runs on the workers, and the calls with it
// (there Citus stops the program: "cannot execute a distributed query from
// a query on a shard"). So every distributed table the statement reads (or
// view over one) becomes (SELECT its columns FROM it OFFSET 0): Citus plans
// a subquery with OFFSET on its own (recursive planning does not push OFFSET
// down), reads the table on the workers into an intermediate result, and
// runs the rest over that result on the coordinator. The columns keep their
// attribute numbers (a dropped column is a NULL), so every Var of the
// statement still names its column; the table's own entry, inside, keeps
// its permissions (the columns the statement selects) and its lock, and the
// rewriter still expands the view and applies row security. A table the
// statement modifies stays as it is (see RefuseDistributedWrite).
void GatherLevel(Query *q, int location) {
  int n = PgCall([&] { return list_length(q->rtable); });
  for (int i = 1; i <= n; i++) {
    RangeTblEntry *rte = PgCall([&] { return rt_fetch(i, q->rtable); });
    if (rte->rtekind != RTE_RELATION || i == q->resultRelation || !DistributedRelation(rte->relid)) continue;
    std::string name = Str(PgCall([&] { return get_rel_name(rte->relid); }));
    auto refuse = [&](const std::string &what, const std::string &hint) {
      throw Error(sqlstate::kFeatureNotSupported,
                  "a statement that calls grad cannot " + what + " of the Citus distributed table " + name,
                  "ddx reads such a table's rows on the coordinator, where grad's values are.", hint, location);
    };
    if (PgCall([&] { return get_parse_rowmark(q, i) != nullptr; }))
      refuse("lock rows", "Drop FOR UPDATE / FOR SHARE, or lock the rows in a statement of their own.");
    RowRefs refs{static_cast<Index>(i), 0, false};
    PgCall([&] { query_tree_walker(q, (bool (*)())FindRowRef, &refs, 0); });
    if (refs.found) refuse("read the system columns or whole rows", "Name its columns one by one.");
    PgCall([&] {
      RangeTblEntry *inner = (RangeTblEntry *)copyObjectImpl(rte);
      Query *sub = makeNode(Query);
      sub->commandType = CMD_SELECT;
      sub->querySource = QSRC_ORIGINAL;
      sub->canSetTag = true;
      sub->rtable = list_make1(inner);
      RangeTblRef *ref = makeNode(RangeTblRef);
      ref->rtindex = 1;
      sub->jointree = makeFromExpr(list_make1(ref), nullptr);
      Relation rel = relation_open(rte->relid, NoLock);  // locked by the statement's parse analysis
      TupleDesc td = RelationGetDescr(rel);
      for (int a = 1; a <= td->natts; a++) {
        Form_pg_attribute att = TupleDescAttr(td, a - 1);
        ::Expr *e = att->attisdropped ? (::Expr *)makeNullConst(INT4OID, -1, InvalidOid)
                                      : (::Expr *)makeVar(1, a, att->atttypid, att->atttypmod, att->attcollation, 0);
        sub->targetList =
            lappend(sub->targetList,
                    makeTargetEntry(e, a, att->attisdropped ? nullptr : pstrdup(NameStr(att->attname)), false));
      }
      relation_close(rel, NoLock);
      sub->limitOffset = (Node *)makeConst(INT8OID, -1, InvalidOid, 8, Int64GetDatum(0), false, FLOAT8PASSBYVAL);
      sub->limitOption = LIMIT_OPTION_COUNT;
      compat::MovePermissions(q, rte, sub, inner);
      ForgetRelation(rte);
      rte->rtekind = RTE_SUBQUERY;
      rte->subquery = sub;
    });
  }
}
// grad's value computed by an UPDATE, DELETE or MERGE of a Citus table that
// is not only the coordinator's (a distributed or reference table): Citus
// runs the statement, and the call with it, on the workers. (Inside a CTE
// of such a statement, the call is a subplan of its own, on the
// coordinator.)
void RefuseDistributedWrite(const GradCall &call) {
  for (size_t i = call.stack.size(); i-- > 0;) {
    Query *q = call.stack[i];
    if ((q->commandType == CMD_UPDATE || q->commandType == CMD_DELETE || q->commandType == CMD_MERGE) &&
        q->resultRelation > 0) {
      Oid relid = PgCall([&] { return rt_fetch(q->resultRelation, q->rtable)->relid; });
      std::string kind = CitusTableKind(relid);
      if (kind == "distributed table" || kind == "reference table")
        throw Error(sqlstate::kFeatureNotSupported,
                    "grad cannot stand in an UPDATE, DELETE or MERGE of the Citus " + kind + " " +
                        Str(PgCall([&] { return get_rel_name(relid); })),
                    "Citus runs such a statement on the workers, and grad's call with it; grad's values are on the "
                    "coordinator.",
                    "Step parameters with ddx_sgd_step or ddx_adamw_step, or compute the gradients first: WITH g AS "
                    "MATERIALIZED (SELECT key, grad(...) AS g FROM ...) UPDATE ... FROM g.",
                    call.fe->location);
    }
    if (call.via_cte[i]) return;
  }
}

}  // namespace ddx::pg
