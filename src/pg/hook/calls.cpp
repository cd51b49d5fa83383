// The calls of ddx's functions in a statement, and what their arguments name
// (see internal.h).
#include "internal.h"

#include "ddx/pg/compat.h"

namespace ddx::pg {
// The Query inside a utility statement that carries one (CTAS, EXPLAIN, DECLARE).
Query *InnerQuery(Query *q) {
  if (q->commandType != CMD_UTILITY || !q->utilityStmt) return nullptr;
  Node *u = q->utilityStmt;
  Node *inner = nullptr;
  if (IsA(u, CreateTableAsStmt))
    inner = castNode(CreateTableAsStmt, u)->query;
  else if (IsA(u, ExplainStmt))
    inner = castNode(ExplainStmt, u)->query;
  else if (IsA(u, DeclareCursorStmt))
    inner = castNode(DeclareCursorStmt, u)->query;
  return inner && IsA(inner, Query) ? castNode(Query, inner) : nullptr;
}

bool IsDdxCall(Node *node) {
  if (!IsA(node, FuncExpr)) return false;
  Oid f = castNode(FuncExpr, node)->funcid;
  return f == oids.grad || (OidIsValid(f) && (f == oids.vjp || f == oids.value || f == oids.jvp || f == oids.hvp));
}

bool Collect(Node *node, Collector *c) {
  if (!node) return false;
  if (IsA(node, Query)) {
    Query *q = castNode(Query, node);
    if (Query *inner = InnerQuery(q)) return Collect((Node *)inner, c);
    c->stack.push_back(q);
    c->via_cte.push_back(c->next_is_cte);
    c->next_is_cte = false;
    query_tree_walker(q, (bool (*)())Collect, c, 0);
    c->stack.pop_back();
    c->via_cte.pop_back();
    return false;
  }
  if (IsA(node, CommonTableExpr)) {
    c->next_is_cte = true;
    return Collect(castNode(CommonTableExpr, node)->ctequery, c);
  }
  if (IsDdxCall(node) && castNode(FuncExpr, node)->funcid == oids.jvp) {
    c->jvps.push_back(JvpCall{castNode(FuncExpr, node), c->stack});
    return false;
  }
  if (IsDdxCall(node)) {
    GradCall call;
    call.fe = castNode(FuncExpr, node);
    call.vjp = call.fe->funcid == oids.vjp;
    call.value = call.fe->funcid == oids.value;
    call.hvp = call.fe->funcid == oids.hvp;
    call.stack = c->stack;
    call.via_cte = c->via_cte;
    c->calls.push_back(call);
    return false;
  }
  return expression_tree_walker(node, (bool (*)())Collect, c);
}

Node *StripRelabel(Node *n) {
  while (n && IsA(n, RelabelType)) n = (Node *)castNode(RelabelType, n)->arg;
  return n;
}

// Resolves grad's second argument to a column of a table.
void ResolveParam(GradCall &call) {
  Node *arg = StripRelabel((Node *)list_nth(call.fe->args, call.vjp ? 2 : 1));
  if (!arg || !IsA(arg, Var))
    throw Error(sqlstate::kUndefinedColumn, "the parameter of grad must be a column of a table",
                "The parameter argument is an expression, not a column.",
                "Write grad('loss', t.col) where t is a table in the FROM list.", call.fe->location);
  call.param = castNode(Var, arg);
  Var *v = call.param;
  if (v->varlevelsup >= call.stack.size()) throw Error(sqlstate::kInternalError, "ddx internal error: bad Var level");
  Query *q = call.stack[call.stack.size() - 1 - v->varlevelsup];
  Index varno = v->varno;
  AttrNumber attno = v->varattno;
  RangeTblEntry *rte = ThroughJoinAliases(q, &varno, &attno);
  char relkind = rte->rtekind == RTE_RELATION ? PgCall([&] { return get_rel_relkind(rte->relid); }) : 0;
  if (rte->rtekind != RTE_RELATION || attno <= 0 ||
      (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE))
    throw Error(sqlstate::kUndefinedColumn, "the parameter of grad must be a column of a table",
                "The parameter argument is a column of a subquery, CTE, view or join, not of a table.",
                "Name a column of a table (ordinary, temporary, unlogged or partitioned) in the FROM list.",
                call.fe->location);
  Oid type = v->vartype;
  if (type != FLOAT8OID && type != FLOAT4OID) {
    std::string tname = Str(PgCall([&] { return format_type_be(type); }));
    throw Error(sqlstate::kDatatypeMismatch, "parameter column is of type " + tname,
                "Gradients are taken with respect to float8 or float4 columns.",
                "Cast the column's type to double precision, or choose a float column.", call.fe->location);
  }
  call.keyed = CitusParameterTable(rte->relid, Str(PgCall([&] { return get_rel_name(rte->relid); })));
  if (call.keyed) call.key_attnos = PrimaryKeyAttnos(rte->relid);
  call.base_varno = varno;
  call.relid = rte->relid;
  call.attname = Str(PgCall([&] { return get_attname(rte->relid, attno, false); }));
}

NamedRel ResolveName(const GradCall &call, Node *arg, const char *what, bool allow_sublink) {
  NamedRel ref;
  if (allow_sublink && IsA(arg, SubLink) && castNode(SubLink, arg)->subLinkType == EXPR_SUBLINK) {
    ref.sublink = castNode(SubLink, arg);
    return ref;
  }
  if (!IsA(arg, Const) ||
      (castNode(Const, arg)->consttype != TEXTOID && castNode(Const, arg)->consttype != UNKNOWNOID) ||
      castNode(Const, arg)->constisnull)
    throw Error(sqlstate::kInvalidParameterValue,
                std::string("the ") + what + " must be a CTE name" +
                    (allow_sublink ? ", a view name or a scalar subquery" : " or a view name"),
                "",
                call.vjp ? "Write vjp('out', 'cotangent', t.col)."
                         : "Write grad('loss', t.col) or grad((SELECT l FROM loss), t.col).",
                call.fe->location);
  Const *k = castNode(Const, arg);
  std::string name = Str(PgCall(
      [&] { return k->consttype == TEXTOID ? TextDatumGetCString(k->constvalue) : DatumGetCString(k->constvalue); }));
  ref.name = name;
  for (int level = static_cast<int>(call.stack.size()) - 1; level >= 0; level--) {
    ListCell *lc;
    foreach (lc, call.stack[level]->cteList) {
      auto *cte = lfirst_node(CommonTableExpr, lc);
      if (name == cte->ctename) {
        ref.cte = cte;
        ref.owner_level = level;
        return ref;
      }
    }
  }
  struct Found {
    Oid relid;
    char relkind;
  };
  Found f = PgCall([&] {
    Found r{InvalidOid, 0};
    List *names = compat::QualifiedNameList(name.c_str());
    r.relid = RangeVarGetRelid(makeRangeVarFromNameList(names), AccessShareLock, true);
    if (OidIsValid(r.relid)) r.relkind = get_rel_relkind(r.relid);
    return r;
  });
  if (!OidIsValid(f.relid))
    throw Error(sqlstate::kUndefinedTable, std::string(what) + " \"" + name + "\" does not exist",
                "It is neither a CTE visible where the call stands nor a view.",
                "Define it in a WITH clause of this statement, or as a view.", call.fe->location);
  if (f.relkind != RELKIND_VIEW)
    throw Error(sqlstate::kInvalidParameterValue, std::string(what) + " \"" + name + "\" is not a view or CTE",
                "A table holds no computation to differentiate.", "Define it as a view or a CTE.", call.fe->location);
  ref.view = f.relid;
  return ref;
}

LossRef ResolveLoss(const GradCall &call) {
  LossRef ref;
  ref.vjp = call.vjp;
  if (call.vjp) {
    ref.out = ResolveName(call, (Node *)linitial(call.fe->args), "output relation", false);
    ref.cot = ResolveName(call, (Node *)lsecond(call.fe->args), "cotangent relation", false);
  } else {
    ref.out = ResolveName(call, (Node *)linitial(call.fe->args), "loss", true);
  }
  return ref;
}

// The column names of a CTE or view.
std::vector<std::string> ColumnNames(const NamedRel &r) {
  std::vector<std::string> names;
  if (r.cte) {
    ListCell *lc;
    foreach (lc, r.cte->ctecolnames) names.push_back(strVal(lfirst(lc)));
    return names;
  }
  struct Raw {
    int n;
    char **names;
  };
  Raw raw = PgCall([&] {
    Relation rel = relation_open(r.view, AccessShareLock);
    TupleDesc td = RelationGetDescr(rel);
    Raw x{td->natts, (char **)palloc(sizeof(char *) * Max(td->natts, 1))};
    for (int i = 0; i < td->natts; i++) x.names[i] = pstrdup(NameStr(TupleDescAttr(td, i)->attname));
    relation_close(rel, AccessShareLock);
    return x;
  });
  for (int i = 0; i < raw.n; i++) names.push_back(raw.names[i]);
  return names;
}

// The range-table entry of column (*varno, *attno) of q, through join
// aliases: a column of a join is the column of the relation it comes from
// (*varno and *attno are moved to it); a join's merged column (USING) or
// whole-row reference stays the join's.
RangeTblEntry *ThroughJoinAliases(Query *q, Index *varno, AttrNumber *attno) {
  RangeTblEntry *rte = rt_fetch(*varno, q->rtable);
  while (rte->rtekind == RTE_JOIN && *attno > 0 && *attno <= list_length(rte->joinaliasvars)) {
    Node *alias = StripRelabel((Node *)list_nth(rte->joinaliasvars, *attno - 1));
    if (!alias || !IsA(alias, Var)) break;
    *varno = castNode(Var, alias)->varno;
    *attno = castNode(Var, alias)->varattno;
    rte = rt_fetch(*varno, q->rtable);
  }
  return rte;
}

// A grad/vjp/jvp/hvp call made a call of one of ddx's internal functions
// (funcid, of float8) with `args`, explicit, without a variadic array.
void RetargetCall(FuncExpr *fe, Oid funcid, List *args) {
  fe->funcid = funcid;
  fe->funcresulttype = FLOAT8OID;
  fe->funcretset = false;
  fe->funcvariadic = false;
  fe->funcformat = COERCE_EXPLICIT_CALL;
  fe->funccollid = InvalidOid;
  fe->inputcollid = InvalidOid;
  fe->args = args;
}

// A relation's range-table entry turned into another kind (a function of
// jvp's rows, a subquery gathering a Citus table): its relation's fields
// cleared, permissions included (a copy of the entry inside keeps them
// where the relation is still read).
void ForgetRelation(RangeTblEntry *rte) {
  rte->security_barrier = false;
  rte->relid = InvalidOid;
  rte->relkind = 0;
  rte->rellockmode = 0;
  rte->tablesample = nullptr;
  rte->inh = false;
  compat::ForgetPermissions(rte);
}

}  // namespace ddx::pg
