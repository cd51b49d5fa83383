// The post_parse_analyze_hook (see hook.h).
//
// Three phases, as in every entry point: PostgreSQL in (walk the Query, read
// catalogs, build IR; catalog calls through PgCall), the core (differentiate,
// emit SQL), PostgreSQL out (rewrite the FuncExpr nodes in place). Every C++
// exception is caught in the shim and raised as ereport after the C++ frames
// are gone, with the position of the grad call.
//
// Why a rewrite into a call with constant arguments: the program text is a
// Const, and the row identity (tableoid, ctid) plain Vars, so the rewritten
// statement survives plan caching, views and plpgsql unchanged; every
// execution runs the program again under its own snapshot (runner.cpp).
#include <map>
#include <string>
#include <vector>

#include "ddx/core/ir.h"
#include "ddx/core/program.h"
#include "ddx/pg/guard.h"
#include "ddx/pg/hook.h"
#include "ddx/pg/translate.h"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/sysattr.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/analyze.h"
#include "parser/parse_func.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/fmgroids.h"
#include "utils/regproc.h"
#include "utils/rel.h"
}

namespace ddx::pg {
namespace {

post_parse_analyze_hook_type prev_post_parse_analyze_hook = nullptr;

// OIDs of ddx's functions in the current database; forgotten on any
// pg_proc invalidation (CREATE/DROP EXTENSION, CREATE FUNCTION ...).
struct DdxOids {
  bool valid;
  bool present;
  Oid grad;
  Oid vjp;
  Oid value;
  Oid grad_at;
  Oid grad_at_params;  // ddx_grad_at(..., VARIADIC "any"): a program with statement parameters
  Oid stop[2];
};
DdxOids oids;

void ForgetOids(Datum, int, uint32) { oids.valid = false; }

// The schema ddx is installed in (get_extension_schema is static in PG 15).
Oid ExtensionSchema(Oid ext) {
  Relation rel = table_open(ExtensionRelationId, AccessShareLock);
  ScanKeyData key;
  ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(ext));
  SysScanDesc scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
  HeapTuple tup = systable_getnext(scan);
  Oid nsp = HeapTupleIsValid(tup) ? ((Form_pg_extension)GETSTRUCT(tup))->extnamespace : InvalidOid;
  systable_endscan(scan);
  table_close(rel, AccessShareLock);
  return nsp;
}

// Looks the OIDs up (PostgreSQL only; may ereport). True if ddx is installed.
bool LookupOids() {
  if (oids.valid) return oids.present;
  DdxOids o{};
  Oid ext = get_extension_oid("ddx", true);
  if (OidIsValid(ext)) {
    char *nsp = get_namespace_name(ExtensionSchema(ext));
    if (nsp) {
      Oid any2[2] = {ANYOID, ANYOID};
      Oid at[5] = {TEXTOID, INT4OID, OIDOID, TIDOID, BOOLOID};
      Oid f8[1] = {FLOAT8OID};
      o.grad = LookupFuncName(list_make2(makeString(nsp), makeString(pstrdup("grad"))), 2, any2, true);
      Oid any3[3] = {ANYOID, ANYOID, ANYOID};
      o.vjp = LookupFuncName(list_make2(makeString(nsp), makeString(pstrdup("vjp"))), 3, any3, true);
      o.value = LookupFuncName(list_make2(makeString(nsp), makeString(pstrdup("ddx_value"))), 1, any2, true);
      o.grad_at = LookupFuncName(list_make2(makeString(nsp), makeString(pstrdup("ddx_grad_at"))), 5, at, true);
      Oid atp[6] = {TEXTOID, INT4OID, OIDOID, TIDOID, BOOLOID, ANYOID};
      o.grad_at_params = LookupFuncName(list_make2(makeString(nsp), makeString(pstrdup("ddx_grad_at"))), 6, atp, true);
      o.stop[0] = LookupFuncName(list_make2(makeString(nsp), makeString(pstrdup("stop_gradient"))), 1, f8, true);
      o.stop[1] = LookupFuncName(list_make2(makeString(nsp), makeString(pstrdup("ddx_stop_gradient"))), 1, f8, true);
    }
  }
  o.present = OidIsValid(o.grad) && OidIsValid(o.grad_at) && OidIsValid(o.grad_at_params);
  o.valid = true;
  oids = o;
  return o.present;
}

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
  return f == oids.grad || (OidIsValid(f) && (f == oids.vjp || f == oids.value));
}

bool ContainsGrad(Node *node, void *ctx) {
  if (!node) return false;
  if (IsDdxCall(node)) return true;
  if (IsA(node, Query)) {
    Query *q = castNode(Query, node);
    if (Query *inner = InnerQuery(q)) return ContainsGrad((Node *)inner, ctx);
    return query_tree_walker(q, (bool (*)())ContainsGrad, ctx, 0);
  }
  return expression_tree_walker(node, (bool (*)())ContainsGrad, ctx);
}

struct GradCall {
  FuncExpr *fe;
  bool vjp = false;            // vjp(out, cotangent, t.col); else grad(loss, t.col)
  bool value = false;          // ddx_value(loss): the loss itself, no parameter
  std::vector<Query *> stack;  // outermost first; back() holds the call
  // resolved
  Var *param = nullptr;  // as written
  Index base_varno = 0;  // the table's RTE, after join aliases
  Oid relid = InvalidOid;
  std::string attname;
  int group = -1;
  int pidx = -1;
};

struct Collector {
  std::vector<GradCall> calls;
  std::vector<Query *> stack;
};

bool Collect(Node *node, Collector *c) {
  if (!node) return false;
  if (IsA(node, Query)) {
    Query *q = castNode(Query, node);
    if (Query *inner = InnerQuery(q)) return Collect((Node *)inner, c);
    c->stack.push_back(q);
    query_tree_walker(q, (bool (*)())Collect, c, 0);
    c->stack.pop_back();
    return false;
  }
  if (IsDdxCall(node)) {
    GradCall call;
    call.fe = castNode(FuncExpr, node);
    call.vjp = call.fe->funcid == oids.vjp;
    call.value = call.fe->funcid == oids.value;
    call.stack = c->stack;
    c->calls.push_back(call);
    return false;
  }
  return expression_tree_walker(node, (bool (*)())Collect, c);
}

Node *StripRelabel(Node *n) {
  while (n && IsA(n, RelabelType)) n = (Node *)castNode(RelabelType, n)->arg;
  return n;
}

std::string Str(const char *s) { return s ? s : ""; }

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
  RangeTblEntry *rte = rt_fetch(v->varno, q->rtable);
  Index varno = v->varno;
  AttrNumber attno = v->varattno;
  while (rte->rtekind == RTE_JOIN && attno > 0 && attno <= list_length(rte->joinaliasvars)) {
    Node *alias = StripRelabel((Node *)list_nth(rte->joinaliasvars, attno - 1));
    if (!alias || !IsA(alias, Var)) break;
    varno = castNode(Var, alias)->varno;
    attno = castNode(Var, alias)->varattno;
    rte = rt_fetch(varno, q->rtable);
  }
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
  call.base_varno = varno;
  call.relid = rte->relid;
  call.attname = Str(PgCall([&] { return get_attname(rte->relid, attno, false); }));
}

// What a loss argument names: a CTE (and the level that owns it), a view, or
// a scalar subquery.
struct NamedRel {
  CommonTableExpr *cte = nullptr;
  int owner_level = -1;
  Oid view = InvalidOid;
  SubLink *sublink = nullptr;
  std::string name;
  bool operator==(const NamedRel &o) const { return cte == o.cte && view == o.view && sublink == o.sublink; }
};

// A loss: grad's relation, or vjp's output relation and cotangent relation.
struct LossRef {
  NamedRel out, cot;
  bool vjp = false;
  bool operator==(const LossRef &o) const { return vjp == o.vjp && out == o.out && (!vjp || cot == o.cot); }
};

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
    List *names = stringToQualifiedNameList(name.c_str());
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

void RewriteStatement(Query *query, std::vector<Oid> stop_oids) {
  Collector c;
  PgCall([&] { Collect((Node *)query, &c); });
  // Group the calls by loss; each group gets one program.
  std::vector<LossRef> losses;
  std::vector<std::vector<ParamTarget>> params;
  for (GradCall &call : c.calls) {
    if (!call.value) ResolveParam(call);
    LossRef ref = ResolveLoss(call);
    size_t g = 0;
    while (g < losses.size() && !(losses[g] == ref)) g++;
    if (g == losses.size()) {
      losses.push_back(ref);
      params.emplace_back();
    }
    call.group = static_cast<int>(g);
    if (call.value) {
      call.pidx = kLossValue;
      continue;
    }
    auto &ps = params[g];
    size_t p = 0;
    while (p < ps.size() && !(ps[p].relid == call.relid && ps[p].attname == call.attname)) p++;
    if (p == ps.size()) ps.push_back(ParamTarget{call.relid, call.attname});
    call.pidx = static_cast<int>(p);
  }
  std::vector<std::string> programs(losses.size());
  std::vector<std::vector<Param *>> extern_params(losses.size());  // the program's $1, $2, ...
  for (size_t g = 0; g < losses.size(); g++) {
    const GradCall *first = nullptr;
    for (const GradCall &call : c.calls)
      if (call.group == static_cast<int>(g) && !first) first = &call;
    try {
      Translator tr(params[g], stop_oids);
      const LossRef &ref = losses[g];
      std::vector<Scope> scopes(first->stack.size());
      for (size_t i = 0; i < scopes.size(); i++) scopes[i] = Scope{first->stack[i], i ? &scopes[i - 1] : nullptr};
      auto translate = [&](const NamedRel &r) {
        if (r.cte) return tr.TranslateCte(r.cte, &scopes[r.owner_level]);
        if (OidIsValid(r.view)) return tr.TranslateView(r.view);
        return tr.TranslateQuery(castNode(Query, r.sublink->subselect), &scopes.back());
      };
      RelP loss = translate(ref.out);
      if (ref.vjp) loss = VjpLoss(loss, ColumnNames(ref.out), translate(ref.cot), ColumnNames(ref.cot));
      if (loss->cols.size() != 1 || !loss->cols[0].differentiable)
        throw Error(sqlstate::kInvalidParameterValue, "the loss must be one row and one number",
                    loss->cols.size() != 1 ? "The loss has " + std::to_string(loss->cols.size()) + " columns."
                                           : "The loss column is of type " + loss->cols[0].sql + ".",
                    "Compute the loss as a single float8 or numeric value, e.g. SELECT avg(...) AS l.");
      programs[g] = BuildGradientProgram(loss).sql;
      extern_params[g] = tr.ExternParams();
    } catch (Error &e) {
      if (e.position < 0) e.position = first->fe->location;
      throw;
    }
  }
  // PostgreSQL out: rewrite each call in place.
  for (GradCall &call : c.calls) {
    const char *sql = programs[call.group].c_str();
    PgCall([&] {
      FuncExpr *fe = call.fe;
      Const *prog = makeConst(TEXTOID, -1, InvalidOid, -1, CStringGetTextDatum(sql), false, false);
      Const *pidx = makeConst(INT4OID, -1, InvalidOid, 4, Int32GetDatum(call.pidx), false, true);
      Node *toid, *ctid, *isnull;
      if (call.value) {  // no row: constants the runner does not read
        ItemPointer none = (ItemPointer)palloc0(sizeof(ItemPointerData));
        toid = (Node *)makeConst(OIDOID, -1, InvalidOid, 4, ObjectIdGetDatum(InvalidOid), false, true);
        ctid = (Node *)makeConst(TIDOID, -1, InvalidOid, sizeof(ItemPointerData), PointerGetDatum(none), false, false);
        isnull = (Node *)makeBoolConst(false, false);
      } else {
        Var *v = call.param;
        toid = (Node *)makeVar(call.base_varno, TableOidAttributeNumber, OIDOID, -1, InvalidOid, v->varlevelsup);
        ctid = (Node *)makeVar(call.base_varno, SelfItemPointerAttributeNumber, TIDOID, -1, InvalidOid, v->varlevelsup);
        NullTest *nt = makeNode(NullTest);
        nt->arg = (::Expr *)copyObjectImpl(v);
        nt->nulltesttype = IS_NULL;
        nt->argisrow = false;
        nt->location = -1;
        isnull = (Node *)nt;
      }
      fe->funcid = extern_params[call.group].empty() ? oids.grad_at : oids.grad_at_params;
      fe->funcresulttype = FLOAT8OID;
      fe->funcretset = false;
      fe->funcvariadic = false;
      fe->funcformat = COERCE_EXPLICIT_CALL;
      fe->funccollid = InvalidOid;
      fe->inputcollid = InvalidOid;
      fe->args = list_make5(prog, pidx, toid, ctid, isnull);
      // each execution's values of the statement parameters the loss reads
      for (Param *p : extern_params[call.group]) fe->args = lappend(fe->args, copyObjectImpl(p));
    });
  }
}

void PostParseAnalyze(ParseState *pstate, Query *query, JumbleState *jstate) {
  if (prev_post_parse_analyze_hook) prev_post_parse_analyze_hook(pstate, query, jstate);
  if (!IsTransactionState() || !LookupOids()) return;
  if (!ContainsGrad((Node *)query, nullptr)) return;
  PendingError err;  // plain buffers: safe to longjmp over
  Guard(err, [&] {
    std::vector<Oid> stop;
    for (Oid o : oids.stop)
      if (OidIsValid(o)) stop.push_back(o);
    RewriteStatement(query, stop);
  });
  if (err.set) err.Raise(pstate);
}

}  // namespace

void InstallHook() {
  prev_post_parse_analyze_hook = post_parse_analyze_hook;
  post_parse_analyze_hook = PostParseAnalyze;
  CacheRegisterSyscacheCallback(PROCOID, ForgetOids, (Datum)0);
}

}  // namespace ddx::pg
