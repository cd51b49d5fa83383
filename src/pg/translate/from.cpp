// FROM items: tables, views, CTEs, subqueries, VALUES, functions, joins and
// unpivots (see translate.h).
#include "internal.h"

namespace ddx::pg {

// The SQL of a statement parameter in the program: its own $k, typed, k
// numbering the distinct parameters in order of first use. The runner binds
// $k to the value the statement's execution has for the parameter (the hook
// passes the Param itself to _ddx.grad_at), so a cached or generic plan
// differentiates with each execution's values.
std::string Translator::ProgramParam(Param *p) {
  size_t k = 0;
  while (k < extern_params_.size() && extern_params_[k]->paramid != p->paramid) k++;
  if (k == extern_params_.size())
    extern_params_.push_back(p);
  else if (extern_params_[k]->paramtype != p->paramtype)
    Refuse("parameter $" + std::to_string(p->paramid) + " of two types in the loss");
  return "($" + std::to_string(k + 1) + "::" + TypeSql(p->paramtype, p->paramtypmod) + ")";
}

void Translator::NoteOpaque(const std::string &name) {
  // (ddx's own helpers, which jvp's and hvp's queries call, read no table)
  if (name.rfind("_ddx.", 0) == 0 || name.rfind("aggregate _ddx.", 0) == 0) return;
  if (std::find(opaque_.begin(), opaque_.end(), name) == opaque_.end()) opaque_.push_back(name);
}

RelP Translator::Table(RangeTblEntry *rte, std::vector<int> *attno_to_col) {
  struct Raw {
    char relkind;
    Oid nsp;
    char *name;
  };
  Raw raw = PgCall([&] {
    return Raw{get_rel_relkind(rte->relid), get_rel_namespace(rte->relid), get_rel_name(rte->relid)};
  });
  if (raw.relkind == RELKIND_VIEW) return TranslateView(rte->relid);
  if (raw.relkind != RELKIND_RELATION && raw.relkind != RELKIND_PARTITIONED_TABLE && raw.relkind != RELKIND_MATVIEW &&
      raw.relkind != RELKIND_FOREIGN_TABLE)
    Refuse("relation \"" + Str(raw.name) + "\" cannot be read by a loss",
           "Only tables, views and materialized views can.");
  if (rte->tablesample) Refuse("TABLESAMPLE in the loss");
  RelP r = NewRel(RelKind::Scan);
  r->table = Qualified(raw.nsp, raw.name);
  r->only = !rte->inh;
  // A plain table or materialized view without inheritance children is read
  // in place by the program, its rows identified by ctid alone. A Citus
  // table never is: the program reads it through a saved copy, whose rid
  // Citus computes on the coordinator (a shard's ctids repeat from shard to
  // shard), and which leaves the rest of the program over intermediate
  // results, which Citus runs without its restrictions on subqueries.
  AttrNumber dist = InvalidAttrNumber;
  r->citus = !CitusTableKind(rte->relid, nullptr, &dist).empty();
  r->single = !r->citus && (raw.relkind == RELKIND_RELATION || raw.relkind == RELKIND_MATVIEW) &&
              (r->only || !PgCall([&] { return has_subclass(rte->relid); }));
  // Every live column, in attribute order (attno_to_col is derived the same way).
  struct Att {
    Oid type;
    int32 typmod;
    char *name;
    bool dropped;
    bool notnull;
  };
  int natts = PgCall([&] { return RelNatts(rte->relid); });
  std::vector<bool> matches(params_.size());
  for (size_t p = 0; p < params_.size(); p++) matches[p] = InSameInheritanceTree(params_[p].relid, rte->relid);
  attno_to_col->assign(natts + 1, -1);
  for (int a = 1; a <= natts; a++) {
    Att att = PgCall([&] {
      Att x{InvalidOid, -1, nullptr, true, false};
      HeapTuple tp = SearchSysCache2(ATTNUM, ObjectIdGetDatum(rte->relid), Int16GetDatum(a));
      if (HeapTupleIsValid(tp)) {
        Form_pg_attribute at = (Form_pg_attribute)GETSTRUCT(tp);
        x = Att{at->atttypid, at->atttypmod, pstrdup(NameStr(at->attname)), at->attisdropped, at->attnotnull};
        ReleaseSysCache(tp);
      }
      return x;
    });
    if (att.dropped) continue;
    (*attno_to_col)[a] = static_cast<int>(r->names.size());
    r->names.push_back(Str(PgCall([&] { return quote_identifier(att.name); })));
    r->cols.push_back(MakeType(att.type, att.typmod));
    // A hash-distributed table's distribution column is never NULL: Citus
    // refuses such a row on INSERT (multi_router_planner.c, "cannot perform
    // an INSERT with NULL in the partition column"), on COPY
    // (multi_copy.c) and on INSERT ... SELECT (partitioned_intermediate_
    // results.c), and never lets it be updated. Known so, a group key of
    // it is a group's rid as it is (ops/aggregate.cpp).
    r->notnull.push_back(att.notnull || a == dist);
    int param = -1;
    for (size_t p = 0; p < params_.size(); p++)
      if (matches[p] && params_[p].attname == Str(att.name)) param = static_cast<int>(p);
    r->param.push_back(param);
  }
  if (r->single)
    for (const auto &attnos : UniqueIndexAttnos(rte->relid)) {
      std::vector<int> cols;
      for (AttrNumber a : attnos) cols.push_back(attno_to_col->at(a));
      r->unique.push_back(cols);
    }
  bool has_param = false;
  for (int p : r->param) has_param = has_param || p >= 0;
  if (r->citus && has_param && CitusParameterTable(rte->relid, r->table))
    for (AttrNumber a : PrimaryKeyAttnos(rte->relid))
      r->identity.push_back(r->names.at(static_cast<size_t>(attno_to_col->at(a))));
  return r;
}

RelP Translator::TranslateView(Oid relid) {
  auto it = views_.find(relid);
  if (it != views_.end()) return it->second;
  Query *vq = PgCall([&] {
    Relation rel = table_open(relid, AccessShareLock);
    Query *q = (Query *)copyObjectImpl(get_view_query(rel));
    table_close(rel, AccessShareLock);
    return q;
  });
  RelP r = TranslateQuery(vq, nullptr);
  views_[relid] = r;
  return r;
}

RelP Translator::TranslateTable(Oid relid) {
  RangeTblEntry *rte = PgCall([&] {
    RangeTblEntry *e = makeNode(RangeTblEntry);
    e->rtekind = RTE_RELATION;
    e->relid = relid;
    e->relkind = get_rel_relkind(relid);
    e->inh = true;
    return e;
  });
  std::vector<int> attno_to_col;
  return Table(rte, &attno_to_col);
}

RelP Translator::TranslateCte(CommonTableExpr *cte, const Scope *owner) {
  auto it = ctes_.find(cte);
  if (it != ctes_.end()) return it->second;
  if (cte->cterecursive) Refuse("recursive CTE \"" + Str(cte->ctename) + "\" in the loss");
  if (!IsA(cte->ctequery, Query) || castNode(Query, cte->ctequery)->commandType != CMD_SELECT)
    Refuse("data-modifying CTE \"" + Str(cte->ctename) + "\" in the loss");
  RelP r = TranslateQuery(castNode(Query, cte->ctequery), owner);
  ctes_[cte] = r;
  return r;
}

namespace {

// unnest(ARRAY[...]): the written-out array of a call to unnest(anyarray).
ArrayExpr *UnnestedArray(Node *n) {
  if (!n || !IsA(n, FuncExpr) || castNode(FuncExpr, n)->funcid != F_UNNEST_ANYARRAY) return nullptr;
  Node *a = (Node *)linitial(castNode(FuncExpr, n)->args);
  return a && IsA(a, ArrayExpr) && !castNode(ArrayExpr, a)->multidims ? castNode(ArrayExpr, a) : nullptr;
}

// The VALUES list of `(VALUES ...) AS v(a, b)` in FROM, which the parser
// makes a subquery SELECT * FROM (VALUES ...); null for any other subquery.
RangeTblEntry *ValuesOf(Query *sub) {
  if (!sub || sub->commandType != CMD_SELECT || sub->setOperations || sub->hasAggs || sub->hasWindowFuncs ||
      sub->hasSubLinks || sub->groupClause || sub->havingQual || sub->sortClause || sub->limitCount ||
      sub->limitOffset || sub->distinctClause || sub->cteList || !sub->jointree || sub->jointree->quals ||
      list_length(sub->jointree->fromlist) != 1 || !IsA(linitial(sub->jointree->fromlist), RangeTblRef))
    return nullptr;
  int rti = castNode(RangeTblRef, linitial(sub->jointree->fromlist))->rtindex;
  RangeTblEntry *v = rt_fetch(rti, sub->rtable);
  if (v->rtekind != RTE_VALUES) return nullptr;
  int i = 0;
  ListCell *lc;
  foreach (lc, sub->targetList) {  // exactly the VALUES columns, in order
    auto *te = lfirst_node(TargetEntry, lc);
    i++;
    if (te->resjunk || !IsA(te->expr, Var) || castNode(Var, te->expr)->varno != rti ||
        castNode(Var, te->expr)->varattno != i || castNode(Var, te->expr)->varlevelsup != 0)
      return nullptr;
  }
  return i == list_length(v->coltypes) ? v : nullptr;
}

// A FROM item that unpivots the row of the items before it: LATERAL
// (VALUES ...), or unnest of written-out arrays (LATERAL without the word:
// PostgreSQL marks a function that reads an earlier item lateral itself).
bool IsUnpivot(Query *q, Node *n) {
  if (!IsA(n, RangeTblRef)) return false;
  RangeTblEntry *rte = rt_fetch(castNode(RangeTblRef, n)->rtindex, q->rtable);
  if (!rte->lateral) return false;
  if (rte->rtekind == RTE_VALUES) return true;
  if (rte->rtekind == RTE_SUBQUERY) return ValuesOf(rte->subquery) != nullptr;
  if (rte->rtekind != RTE_FUNCTION) return false;
  ListCell *lc;
  foreach (lc, rte->functions)
    if (!UnnestedArray(lfirst_node(RangeTblFunction, lc)->funcexpr)) return false;
  return true;
}

}  // namespace

// `left` joined with a LATERAL VALUES list or unnest(ARRAY[...], ...) that
// reads its columns: one copy of left per row of the item, each with that
// row's values as expressions over left's columns (a UNION ALL of
// projections, whose reverse rules sum the copies' cotangents into left).
// Several arrays zip, the shorter padded with NULL, as ROWS FROM does; WITH
// ORDINALITY numbers the rows from 1. `map` gains the item's columns.
RelP Translator::Unpivot(Query *q, int rtindex, RelP left, const Scope *scope, ColMap &map) {
  RangeTblEntry *rte = rt_fetch(rtindex, q->rtable);
  Ctx c;
  c.map = &map;
  c.q = q;
  c.scope = scope;
  std::vector<std::vector<ExprP>> rows;
  std::vector<Type> types;
  ListCell *lc;
  if (rte->rtekind == RTE_SUBQUERY) {
    // the lists read the items before at level 1: bring them to this level
    RangeTblEntry *v = ValuesOf(rte->subquery);
    List *lists = PgCall([&] {
      auto *copy = (List *)copyObjectImpl(v->values_lists);
      IncrementVarSublevelsUp((Node *)copy, -1, 1);
      return copy;
    });
    RangeTblEntry *flat = PgCall([&] { return (RangeTblEntry *)copyObjectImpl(v); });
    flat->values_lists = lists;
    rte = flat;
  }
  if (rte->rtekind == RTE_VALUES) {
    foreach (lc, rte->values_lists) {
      std::vector<ExprP> row;
      ListCell *lv;
      foreach (lv, (List *)lfirst(lc)) row.push_back(Expr((Node *)lfirst(lv), c));
      rows.push_back(row);
    }
    ListCell *lt, *lm;
    forboth(lt, rte->coltypes, lm, rte->coltypmods) types.push_back(MakeType(lfirst_oid(lt), lfirst_int(lm)));
  } else {
    std::vector<ArrayExpr *> arrays;
    size_t n = 0;
    foreach (lc, rte->functions) {
      arrays.push_back(UnnestedArray(lfirst_node(RangeTblFunction, lc)->funcexpr));
      n = std::max(n, static_cast<size_t>(list_length(arrays.back()->elements)));
      types.push_back(MakeType(arrays.back()->element_typeid, -1));
    }
    if (rte->funcordinality) types.push_back(kInt8);
    for (size_t i = 0; i < n; i++) {
      std::vector<ExprP> row;
      for (size_t a = 0; a < arrays.size(); a++) {
        if (i < static_cast<size_t>(list_length(arrays[a]->elements))) {
          row.push_back(Expr((Node *)list_nth(arrays[a]->elements, static_cast<int>(i)), c));
        } else {
          auto null = std::make_shared<ddx::Expr>();
          null->kind = ExprKind::Const;
          null->type = types[a];
          null->text = "NULL::" + types[a].sql;
          row.push_back(null);
        }
      }
      if (rte->funcordinality) {
        auto k = std::make_shared<ddx::Expr>();
        k->kind = ExprKind::Const;
        k->type = types.back();
        k->text = std::to_string(i + 1) + "::pg_catalog.int8";
        row.push_back(k);
      }
      rows.push_back(row);
    }
  }
  int nl = static_cast<int>(left->cols.size());
  RelP u = NewRel(RelKind::UnionAll);
  u->cols = left->cols;
  u->cols.insert(u->cols.end(), types.begin(), types.end());
  for (auto &row : rows) {
    std::vector<ExprP> exprs;
    for (int i = 0; i < nl; i++) exprs.push_back(MakeCol(i, 0, left->cols[i]));
    exprs.insert(exprs.end(), row.begin(), row.end());
    u->inputs.push_back(MakeProject(left, exprs));
  }
  for (size_t a = 0; a < types.size(); a++) map[{rtindex, static_cast<int>(a) + 1}] = nl + static_cast<int>(a);
  if (u->inputs.empty()) Refuse("unnest of an empty array in the loss");
  return u->inputs.size() == 1 ? u->inputs[0] : u;
}

RelP Translator::RangeTableEntry(Query *q, int rtindex, const Scope *scope, std::vector<int> &attno_to_col) {
  RangeTblEntry *rte = rt_fetch(rtindex, q->rtable);
  if (rte->lateral && rte->rtekind == RTE_SUBQUERY && ValuesOf(rte->subquery))
    Refuse("a LATERAL VALUES list here in the loss", "It unpivots the row of the FROM items before it.",
           "Write it after them: FROM t CROSS JOIN LATERAL (VALUES ...) AS v(...).");
  if (rte->lateral && rte->rtekind != RTE_VALUES && rte->rtekind != RTE_FUNCTION)
    Refuse("a LATERAL subquery in the loss", "",
           "Join the subquery's tables instead; to unpivot a row, use LATERAL (VALUES ...) or unnest(ARRAY[...]).");
  if (rte->lateral && rte->rtekind == RTE_FUNCTION)
    Refuse("a LATERAL function in the loss", "Only unnest(ARRAY[...]) of arrays written out can read an earlier item.",
           "To unpivot a row, use LATERAL (VALUES ...) or unnest(ARRAY[...]).");
  RelP r;
  switch (rte->rtekind) {
    case RTE_RELATION:
      r = Table(rte, &attno_to_col);
      if (r->kind == RelKind::Scan) return r;
      break;
    case RTE_SUBQUERY:
      r = TranslateQuery(rte->subquery, scope);
      break;
    case RTE_CTE: {
      const Scope *owner = scope;
      for (Index l = 0; l < rte->ctelevelsup && owner; l++) owner = owner->parent;
      if (!owner) throw Error(sqlstate::kInternalError, "ddx internal error: CTE scope not found");
      CommonTableExpr *found = nullptr;
      ListCell *lc;
      foreach (lc, owner->query->cteList) {
        auto *cte = lfirst_node(CommonTableExpr, lc);
        if (strcmp(cte->ctename, rte->ctename) == 0) found = cte;
      }
      if (!found) throw Error(sqlstate::kInternalError, "ddx internal error: CTE not found");
      r = TranslateCte(found, owner);
      break;
    }
    case RTE_VALUES: {
      r = NewRel(RelKind::Values);
      Ctx none;
      ListCell *lr, *lv;
      foreach (lr, rte->values_lists) {
        std::vector<ExprP> row;
        foreach (lv, (List *)lfirst(lr)) row.push_back(Expr((Node *)lfirst(lv), none));
        r->rows.push_back(row);
      }
      ListCell *lt, *lm;
      forboth(lt, rte->coltypes, lm, rte->coltypmods) r->cols.push_back(MakeType(lfirst_oid(lt), lfirst_int(lm)));
      break;
    }
    case RTE_FUNCTION: {
      // a set-returning SQL function that PostgreSQL inlines is its query
      if (list_length(rte->functions) == 1 && !rte->funcordinality &&
          IsA(linitial_node(RangeTblFunction, rte->functions)->funcexpr, FuncExpr)) {
        Oid fid = castNode(FuncExpr, linitial_node(RangeTblFunction, rte->functions)->funcexpr)->funcid;
        Query *sub =
            std::find(inlining_.begin(), inlining_.end(), fid) == inlining_.end() ? InlinedSetReturning(rte) : nullptr;
        if (sub) {
          Inlining in(inlining_, fid);
          r = TranslateQuery(sub, scope);
          break;
        }
      }
      if (list_length(rte->functions) != 1 || rte->funcordinality)
        Refuse("function in FROM of the loss",
               "Only a single set-returning function of one column, without ORDINALITY.");
      auto *rtf = linitial_node(RangeTblFunction, rte->functions);
      Oid rettype = exprType(rtf->funcexpr);
      bool composite = PgCall([&] { return type_is_rowtype(rettype); });
      if (rtf->funccolcount != 1 || composite)
        Refuse("function in FROM of the loss",
               "Only a single set-returning function of one column, without ORDINALITY.");
      r = NewRel(RelKind::Function);
      Ctx none;
      none.q = q;
      r->exprs = {Expr(rtf->funcexpr, none)};
      r->cols = {ExprTypeOf(rtf->funcexpr)};
      break;
    }
    default:
      Refuse("this kind of FROM item is not supported in the loss");
  }
  attno_to_col.assign(r->cols.size() + 1, -1);
  for (size_t i = 0; i < r->cols.size(); i++) attno_to_col[i + 1] = static_cast<int>(i);
  return r;
}

RelP Translator::JoinTreeItem(Query *q, Node *n, const Scope *scope, ColMap &map) {
  if (IsA(n, RangeTblRef)) {
    int rtindex = castNode(RangeTblRef, n)->rtindex;
    std::vector<int> attno_to_col;
    RelP r = RangeTableEntry(q, rtindex, scope, attno_to_col);
    for (size_t a = 1; a < attno_to_col.size(); a++)
      if (attno_to_col[a] >= 0) map[{rtindex, static_cast<int>(a)}] = attno_to_col[a];
    return r;
  }
  if (IsA(n, FromExpr)) {
    auto *fe = castNode(FromExpr, n);
    return FromList(q, fe->fromlist, fe->quals, scope, map);
  }
  if (IsA(n, JoinExpr)) {
    auto *je = castNode(JoinExpr, n);
    ColMap lm, rm;
    if (IsUnpivot(q, je->rarg)) {  // t CROSS JOIN LATERAL (VALUES ...) AS u ON ...
      // every row of the left finds a row in VALUES or unnest: LEFT JOIN
      // LATERAL ... ON true is the inner join
      bool always = !je->quals || (IsA(je->quals, Const) && !castNode(Const, je->quals)->constisnull &&
                                   DatumGetBool(castNode(Const, je->quals)->constvalue));
      if (je->jointype != JOIN_INNER && !(je->jointype == JOIN_LEFT && always))
        Refuse("an outer join with LATERAL in the loss", "", "Write CROSS JOIN LATERAL, or JOIN LATERAL ... ON.");
      RelP l = JoinTreeItem(q, je->larg, scope, map);
      RelP r = Unpivot(q, castNode(RangeTblRef, je->rarg)->rtindex, l, scope, map);
      if (!je->quals) return r;
      Ctx c;
      c.map = &map;
      c.q = q;
      c.scope = scope;
      return MakeFilter(r, Expr(je->quals, c));
    }
    RelP l = JoinTreeItem(q, je->larg, scope, lm);
    RelP r = JoinTreeItem(q, je->rarg, scope, rm);
    JoinKind jk;
    switch (je->jointype) {
      case JOIN_INNER:
        jk = JoinKind::Inner;
        break;
      case JOIN_LEFT:
        jk = JoinKind::Left;
        break;
      case JOIN_RIGHT:
        jk = JoinKind::Left;
        std::swap(l, r);
        std::swap(lm, rm);
        break;
      case JOIN_FULL:
        jk = JoinKind::Full;
        break;
      default:
        Refuse("this kind of join is not supported in the loss");
    }
    int nl = static_cast<int>(l->cols.size());
    for (auto &[k, v] : lm) map[k] = v;
    for (auto &[k, v] : rm) map[k] = v + nl;
    ExprP cond;
    if (je->quals) {
      std::vector<SubLink *> links;
      CollectScalarSublinks(je->quals, &links);
      if (!links.empty()) Refuse("scalar subquery in a JOIN condition of the loss", "", "Move it to WHERE.");
      Ctx c;
      c.map = &map;
      c.q = q;
      c.scope = scope;
      cond = Expr(je->quals, c);
    }
    return MakeJoin(l, r, jk, cond);
  }
  Refuse("this FROM item is not supported in the loss");
}

RelP Translator::FromList(Query *q, List *fromlist, Node *quals, const Scope *scope, ColMap &map) {
  RelP rel;
  ListCell *lc;
  foreach (lc, fromlist) {
    if (rel && IsUnpivot(q, (Node *)lfirst(lc))) {  // FROM t, unnest(ARRAY[t.a, t.b]) AS u
      rel = Unpivot(q, castNode(RangeTblRef, lfirst(lc))->rtindex, rel, scope, map);
      continue;
    }
    ColMap m;
    RelP r = JoinTreeItem(q, (Node *)lfirst(lc), scope, m);
    if (!rel) {
      rel = r;
      map = m;
    } else {
      int nl = static_cast<int>(rel->cols.size());
      for (auto &[k, v] : m) map[k] = v + nl;
      rel = MakeJoin(rel, r, JoinKind::Inner, nullptr);
    }
  }
  if (!rel) {  // no FROM: one row
    rel = NewRel(RelKind::Values);
    rel->rows = {{MakeConst("1", kInt4)}};
    rel->cols = {kInt4};
  }
  if (quals) {  // a nested FromExpr's own quals
    Ctx c;
    c.map = &map;
    c.q = q;
    c.scope = scope;
    rel = MakeFilter(rel, Expr(quals, c));
  }
  return rel;
}

RelP Translator::JoinScalars(RelP rel, const std::vector<SubLink *> &links, const Scope *scope,
                             std::map<const SubLink *, int> &out) {
  for (SubLink *sl : links) {
    RelP s;
    auto it = scalars_.find(sl);
    if (it != scalars_.end()) {
      s = it->second;
    } else {
      RelP sub = TranslateQuery(castNode(Query, sl->subselect), scope);
      if (sub->cols.size() != 1) Refuse("scalar subquery of more than one column");
      s = NewRel(RelKind::Scalar);
      s->cols = sub->cols;
      s->inputs = {sub};
      scalars_[sl] = s;
    }
    out[sl] = static_cast<int>(rel->cols.size());
    rel = MakeJoin(rel, s, JoinKind::Inner, nullptr);
  }
  return rel;
}

}  // namespace ddx::pg
