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
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "ddx/core/ir.h"
#include "ddx/core/program.h"
#include "ddx/pg/contraction_node.h"
#include "ddx/pg/guard.h"
#include "ddx/pg/hook.h"
#include "ddx/pg/runner.h"
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
#include "catalog/pg_collation.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/analyze.h"
#include "parser/parser.h"
#include "parser/parse_func.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
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
  Oid grad_at_params;  // _ddx.grad_at(..., VARIADIC "any"): a program with statement parameters
  Oid grad_key;        // _ddx.grad_key(text, int4, oid, text, bool): a row identified by primary key
  Oid grad_key_params;
  Oid jvp;       // jvp(out.col, VARIADIC text[]): forward mode
  Oid hvp;       // hvp(loss, t.col, VARIADIC text[]): H·v, the gradient of a jvp
  Oid jvp_at;    // _ddx.jvp_at(float8): what a jvp call becomes (the tangent column, as it is)
  Oid jvp_rows;  // _ddx.jvp_rows(text [, VARIADIC "any"]): the output's rows with their tangents
  Oid jvp_rows_params;
  Oid stop[2];
  // ddx_stop_gradient's schema-qualified name, for hvp's tangent query
  // (BuildTangentSql): plain bytes, no destructor in a global
  char stop_sql[2 * NAMEDATALEN + 8];
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
      o.grad_at = LookupFuncName(list_make2(makeString(pstrdup("_ddx")), makeString(pstrdup("grad_at"))), 5, at, true);
      Oid atp[6] = {TEXTOID, INT4OID, OIDOID, TIDOID, BOOLOID, ANYOID};
      o.grad_at_params =
          LookupFuncName(list_make2(makeString(pstrdup("_ddx")), makeString(pstrdup("grad_at"))), 6, atp, true);
      Oid key[5] = {TEXTOID, INT4OID, OIDOID, TEXTOID, BOOLOID};
      o.grad_key =
          LookupFuncName(list_make2(makeString(pstrdup("_ddx")), makeString(pstrdup("grad_key"))), 5, key, true);
      Oid keyp[6] = {TEXTOID, INT4OID, OIDOID, TEXTOID, BOOLOID, ANYOID};
      o.grad_key_params =
          LookupFuncName(list_make2(makeString(pstrdup("_ddx")), makeString(pstrdup("grad_key"))), 6, keyp, true);
      Oid jv[2] = {ANYOID, TEXTARRAYOID};
      o.jvp = LookupFuncName(list_make2(makeString(nsp), makeString(pstrdup("jvp"))), 2, jv, true);
      Oid t1[1] = {TEXTOID}, t2[2] = {TEXTOID, ANYOID};
      o.jvp_rows =
          LookupFuncName(list_make2(makeString(pstrdup("_ddx")), makeString(pstrdup("jvp_rows"))), 1, t1, true);
      o.jvp_rows_params =
          LookupFuncName(list_make2(makeString(pstrdup("_ddx")), makeString(pstrdup("jvp_rows"))), 2, t2, true);
      Oid hv[3] = {ANYOID, ANYOID, TEXTARRAYOID};
      o.hvp = LookupFuncName(list_make2(makeString(nsp), makeString(pstrdup("hvp"))), 3, hv, true);
      o.jvp_at = LookupFuncName(list_make2(makeString(pstrdup("_ddx")), makeString(pstrdup("jvp_at"))), 1, f8, true);
      o.stop[0] = LookupFuncName(list_make2(makeString(nsp), makeString(pstrdup("stop_gradient"))), 1, f8, true);
      o.stop[1] = LookupFuncName(list_make2(makeString(nsp), makeString(pstrdup("ddx_stop_gradient"))), 1, f8, true);
      snprintf(o.stop_sql, sizeof o.stop_sql, "%s", quote_qualified_identifier(nsp, "ddx_stop_gradient"));
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
  return f == oids.grad || (OidIsValid(f) && (f == oids.vjp || f == oids.value || f == oids.jvp || f == oids.hvp));
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
  bool hvp = false;            // hvp(loss, t.col, 'w.val', 'tw', ...): (H·tangents) at t.col
  std::vector<Query *> stack;  // outermost first; back() holds the call
  std::vector<bool> via_cte;   // per level: whether it is a CTE of the level above
  // resolved
  Var *param = nullptr;  // as written
  Index base_varno = 0;  // the table's RTE, after join aliases
  Oid relid = InvalidOid;
  std::string attname;
  bool keyed = false;  // a Citus table: the row is identified by its primary key
  std::vector<AttrNumber> key_attnos;
  int group = -1;
  int pidx = -1;
};

struct JvpCall {
  FuncExpr *fe;
  std::vector<Query *> stack;  // outermost first; back() holds the call
};

struct Collector {
  std::vector<GradCall> calls;
  std::vector<JvpCall> jvps;
  std::vector<Query *> stack;
  std::vector<bool> via_cte;
  bool next_is_cte = false;
};

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
  call.keyed = CitusParameterTable(rte->relid, Str(PgCall([&] { return get_rel_name(rte->relid); })));
  if (call.keyed) call.key_attnos = PrimaryKeyAttnos(rte->relid);
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
  std::vector<std::string> hvp;  // hvp's (parameter, tangent relation) pairs: the loss is the jvp of `out`
  bool operator==(const LossRef &o) const {
    return vjp == o.vjp && out == o.out && (!vjp || cot == o.cot) && hvp == o.hvp;
  }
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
  rte->requiredPerms = 0;
  rte->checkAsUser = InvalidOid;
  rte->selectedCols = rte->insertedCols = rte->updatedCols = rte->extraUpdatedCols = nullptr;
}

// --- forward mode (jvp) --------------------------------------------------------
//
// jvp(o.v, 'w.val', 'tw' [, 'b.val', 'tb' ...]) stands in a query whose FROM
// list holds o, a reference to a CTE, a view or a subquery: the derivative of
// column v of o's current row along the tangent relations tw (of w.val), tb
// .... The reference is replaced by one query (the core's BuildTangentSql)
// whose rows are o's rows, its columns o's columns followed by their
// tangents, and each call by that row's tangent column: forward mode runs as
// the statement runs, in its plan and snapshot, with no program of its own.

// The string arguments of a jvp or hvp call from argument `argno` on:
// (parameter, tangent relation) pairs.
std::vector<std::string> TextPairs(FuncExpr *fe, int argno) {
  auto fail = [&] {
    throw Error(sqlstate::kInvalidParameterValue, "the parameters and tangents of jvp must be string literals",
                "jvp takes a column of a relation in the FROM list, then pairs of a parameter column and its tangent "
                "relation.",
                "Write jvp(o.v, 'w.val', 'tangent_of_w' [, 'b.val', 'tangent_of_b' ...]).", fe->location);
  };
  Node *arr = StripRelabel((Node *)list_nth(fe->args, argno));
  std::vector<std::string> out;
  if (!arr || !IsA(arr, ArrayExpr)) fail();
  ListCell *lc;
  foreach (lc, castNode(ArrayExpr, arr)->elements) {
    Node *e = StripRelabel((Node *)lfirst(lc));
    if (!e || !IsA(e, Const) || castNode(Const, e)->constisnull) fail();
    Const *k = castNode(Const, e);
    out.push_back(Str(PgCall([&] { return TextDatumGetCString(k->constvalue); })));
  }
  if (out.empty() || out.size() % 2)
    throw Error(sqlstate::kInvalidParameterValue, "jvp needs pairs of a parameter column and its tangent relation",
                std::to_string(out.size()) + " string argument(s) given.",
                "Write jvp(o.v, 'w.val', 'tangent_of_w' [, 'b.val', 'tangent_of_b' ...]).", fe->location);
  return out;
}

// The live columns of a table or view, in order.
std::vector<std::string> RelColumnNames(Oid relid) {
  struct Raw {
    int n;
    char **names;
  };
  Raw raw = PgCall([&] {
    Relation rel = relation_open(relid, AccessShareLock);
    TupleDesc td = RelationGetDescr(rel);
    Raw x{0, (char **)palloc(sizeof(char *) * Max(td->natts, 1))};
    for (int i = 0; i < td->natts; i++)
      if (!TupleDescAttr(td, i)->attisdropped) x.names[x.n++] = pstrdup(NameStr(TupleDescAttr(td, i)->attname));
    relation_close(rel, AccessShareLock);
    return x;
  });
  return std::vector<std::string>(raw.names, raw.names + raw.n);
}

// A parameter 'table.column' (or 'schema.table.column') of jvp.
ParamTarget JvpParam(FuncExpr *fe, const std::string &spec) {
  struct Found {
    Oid relid;
    char relkind;
    Oid type;
    char *att;
  };
  Found f = PgCall([&] {
    Found r{InvalidOid, 0, InvalidOid, nullptr};
    List *names = stringToQualifiedNameList(spec.c_str());
    if (list_length(names) < 2) return r;
    r.att = pstrdup(strVal(llast(names)));
    names = list_truncate(names, list_length(names) - 1);
    r.relid = RangeVarGetRelid(makeRangeVarFromNameList(names), AccessShareLock, true);
    if (OidIsValid(r.relid)) {
      r.relkind = get_rel_relkind(r.relid);
      AttrNumber a = get_attnum(r.relid, r.att);
      if (a != InvalidAttrNumber) r.type = get_atttype(r.relid, a);
    }
    return r;
  });
  if (!f.att)
    throw Error(sqlstate::kInvalidParameterValue, "parameter \"" + spec + "\" of jvp is not of the form table.column",
                "", "Write 'table.column' or 'schema.table.column'.", fe->location);
  if (!OidIsValid(f.relid) || (f.relkind != RELKIND_RELATION && f.relkind != RELKIND_PARTITIONED_TABLE))
    throw Error(sqlstate::kUndefinedTable, "table of parameter \"" + spec + "\" of jvp does not exist", "",
                "Name a table (ordinary, temporary, unlogged or partitioned) and one of its columns.", fe->location);
  if (!OidIsValid(f.type))
    throw Error(sqlstate::kUndefinedColumn, "parameter column \"" + spec + "\" of jvp does not exist", "", "",
                fe->location);
  if (f.type != FLOAT8OID && f.type != FLOAT4OID)
    throw Error(sqlstate::kDatatypeMismatch, "parameter column \"" + spec + "\" of jvp is not float8 or float4",
                "Derivatives are taken along float8 or float4 columns.", "", fe->location);
  RefuseCitusTable(f.relid, spec, "the parameter's table of");
  return ParamTarget{f.relid, f.att};
}

// The parameters that pairs (parameter, tangent relation) name.
std::vector<ParamTarget> PairParams(FuncExpr *fe, const std::vector<std::string> &texts) {
  std::vector<ParamTarget> params;
  for (size_t k = 0; k < texts.size(); k += 2) {
    ParamTarget p = JvpParam(fe, texts[k]);
    for (const auto &x : params)
      if (x.relid == p.relid && x.attname == p.attname)
        throw Error(sqlstate::kInvalidParameterValue, "parameter \"" + texts[k] + "\" is given twice to jvp", "", "",
                    fe->location);
    params.push_back(p);
  }
  return params;
}

// The tangent relations of pairs: CTEs visible from `level` of `stack`, or
// tables or views, translated with no parameter (a tangent is a constant of
// the derivative), each with its value column and its keys.
std::vector<Tangent> PairTangents(FuncExpr *fe, const std::vector<Query *> &stack, int level,
                                  std::vector<Scope> &scopes, const std::vector<std::string> &texts,
                                  const std::vector<ParamTarget> &params, const std::vector<Oid> &stop_oids) {
  // The tangent relations: of no parameter (a tangent is a constant of the derivative).
  Translator tt({}, stop_oids);
  std::vector<Tangent> tangents(params.size());
  for (size_t k = 0; k < params.size(); k++) {
    NamedRel t;
    std::vector<std::string> names;
    const std::string &tname = texts[2 * k + 1];
    for (int l = level; l >= 0 && !t.cte; l--) {
      ListCell *lc;
      foreach (lc, stack[l]->cteList) {
        auto *cte = lfirst_node(CommonTableExpr, lc);
        if (tname == cte->ctename) t.cte = cte, t.owner_level = l;
      }
    }
    if (t.cte) {
      tangents[k].rel = tt.TranslateCte(t.cte, &scopes[t.owner_level]);
      ListCell *lc;
      foreach (lc, t.cte->ctecolnames) names.push_back(strVal(lfirst(lc)));
    } else {
      Oid relid = PgCall([&] {
        return RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(tname.c_str())), AccessShareLock,
                                true);
      });
      if (!OidIsValid(relid))
        throw Error(sqlstate::kUndefinedTable, "tangent relation \"" + tname + "\" does not exist",
                    "It is neither a CTE visible where the call stands nor a table or view.", "", fe->location);
      char kind = PgCall([&] { return get_rel_relkind(relid); });
      tangents[k].rel = kind == RELKIND_VIEW ? tt.TranslateView(relid) : tt.TranslateTable(relid);
      names = RelColumnNames(relid);
    }
    if (!tt.ExternParams().empty())
      throw Error(sqlstate::kFeatureNotSupported, "tangent relation \"" + tname + "\" reads statement parameters", "",
                  "Compute the tangents into a table or a CTE of constants.", fe->location);
    for (size_t c = 0; c < names.size(); c++) {
      if (names[c] == params[k].attname) {
        tangents[k].value = static_cast<int>(c);
        continue;
      }
      bool key = PgCall([&] { return get_attnum(params[k].relid, names[c].c_str()) != InvalidAttrNumber; });
      if (!key)
        throw Error(sqlstate::kUndefinedColumn,
                    "column \"" + names[c] + "\" of tangent relation \"" + tname +
                        "\" is not a column of the "
                        "parameter's table",
                    "A tangent relation has the parameter table's key columns and the tangent, under the "
                    "parameter column's name.",
                    "", fe->location);
      tangents[k].keys.push_back(
          {static_cast<int>(c), Str(PgCall([&] { return quote_identifier(names[c].c_str()); }))});
    }
    if (tangents[k].value < 0)
      throw Error(
          sqlstate::kUndefinedColumn, "tangent relation \"" + tname + "\" has no column \"" + params[k].attname + "\"",
          "The tangent of parameter " + texts[2 * k] + " is the column of the parameter's name.", "", fe->location);
  }
  return tangents;
}

// Where the output of a jvp call is: its query, range table entry, column.
struct JvpOut {
  int level = -1;  // the query's index in the call's stack
  Index rtindex = 0;
  AttrNumber attno = 0;
  Index varlevelsup = 0;
};

JvpOut ResolveJvpOut(const JvpCall &call) {
  auto refuse = [&](const std::string &detail) {
    throw Error(sqlstate::kUndefinedColumn, "the first argument of jvp must be a column of a CTE, view or subquery",
                detail,
                "Write jvp(o.v, 'w.val', 'tangent_of_w') where o is a CTE, a view or a subquery in the FROM list.",
                call.fe->location);
  };
  Node *arg = StripRelabel((Node *)linitial(call.fe->args));
  if (!arg || !IsA(arg, Var)) refuse("The first argument is an expression, not a column.");
  Var *v = castNode(Var, arg);
  if (v->varlevelsup >= call.stack.size()) throw Error(sqlstate::kInternalError, "ddx internal error: bad Var level");
  JvpOut o;
  o.level = static_cast<int>(call.stack.size() - 1 - v->varlevelsup);
  o.varlevelsup = v->varlevelsup;
  Query *q = call.stack[o.level];
  Index varno = v->varno;
  AttrNumber attno = v->varattno;
  RangeTblEntry *rte = rt_fetch(varno, q->rtable);
  while (rte->rtekind == RTE_JOIN && attno > 0 && attno <= list_length(rte->joinaliasvars)) {
    Node *alias = StripRelabel((Node *)list_nth(rte->joinaliasvars, attno - 1));
    if (!alias || !IsA(alias, Var)) break;
    varno = castNode(Var, alias)->varno;
    attno = castNode(Var, alias)->varattno;
    rte = rt_fetch(varno, q->rtable);
  }
  bool view = rte->rtekind == RTE_RELATION && PgCall([&] { return get_rel_relkind(rte->relid); }) == RELKIND_VIEW;
  if (attno <= 0 || !(rte->rtekind == RTE_CTE || rte->rtekind == RTE_SUBQUERY || view))
    refuse("It is a column of a table, a function or a join, which holds no computation to differentiate.");
  o.rtindex = varno;
  o.attno = attno;
  return o;
}

// The CTE that range table entry `rte` of the query at `level` reads, and its owner's level.
CommonTableExpr *CteOf(const std::vector<Query *> &stack, int level, RangeTblEntry *rte, int &owner) {
  owner = level - static_cast<int>(rte->ctelevelsup);
  if (owner < 0) throw Error(sqlstate::kInternalError, "ddx internal error: bad CTE level");
  ListCell *lc;
  foreach (lc, stack[owner]->cteList) {
    auto *cte = lfirst_node(CommonTableExpr, lc);
    if (strcmp(cte->ctename, rte->ctename) == 0) return cte;
  }
  throw Error(sqlstate::kInternalError, "ddx internal error: CTE not found");
}

// Statement parameters in the analyzed tangent query: the original Params
// (a plpgsql variable, PREPARE's $n) in place of the query's own $k.
bool RestoreParams(Node *node, void *ctx) {
  if (!node) return false;
  auto *params = static_cast<const std::vector<Param *> *>(ctx);
  if (IsA(node, Param)) {
    Param *p = castNode(Param, node);
    if (p->paramkind == PARAM_EXTERN && p->paramid >= 1 && p->paramid <= static_cast<int>(params->size()))
      *p = *(*params)[p->paramid - 1];
    return false;
  }
  if (IsA(node, Query)) return query_tree_walker(castNode(Query, node), (bool (*)())RestoreParams, ctx, 0);
  return expression_tree_walker(node, (bool (*)())RestoreParams, ctx);
}

// The analyzed query of `sql` (names resolved as the runner resolves a
// program's: SetProgramSearchPath), with `params` as its $1 ....
Query *AnalyzeTangentSql(const std::string &sql, const std::vector<Param *> &params) {
  return PgCall([&] {
    int nest = NewGUCNestLevel();
    SetProgramSearchPath();
    char *text = pstrdup(sql.c_str());
    List *raw = raw_parser(text, RAW_PARSE_DEFAULT);
    Oid *types = (Oid *)palloc(sizeof(Oid) * Max(params.size(), 1));
    for (size_t i = 0; i < params.size(); i++) types[i] = params[i]->paramtype;
    Query *q =
        parse_analyze_fixedparams(linitial_node(RawStmt, raw), text, types, static_cast<int>(params.size()), NULL);
    AtEOXact_GUC(true, nest);
    RestoreParams((Node *)q, (void *)&params);
    return q;
  });
}

void RewriteJvps(std::vector<JvpCall> &calls, const std::vector<Oid> &stop_oids) {
  // One rewrite per output reference (query, range table entry).
  std::vector<size_t> done(calls.size(), 0);
  for (size_t i = 0; i < calls.size(); i++) {
    if (done[i]) continue;
    const JvpCall &first = calls[i];
    JvpOut out = ResolveJvpOut(first);
    std::vector<std::string> texts = TextPairs(first.fe, 1);
    std::vector<size_t> group;
    for (size_t j = i; j < calls.size(); j++) {
      if (done[j]) continue;
      JvpOut o = ResolveJvpOut(calls[j]);
      if (calls[j].stack[o.level] != first.stack[out.level] || o.rtindex != out.rtindex) continue;
      if (TextPairs(calls[j].fe, 1) != texts)
        throw Error(sqlstate::kFeatureNotSupported, "jvp calls on one relation name different tangents",
                    "Every jvp call on one reference to a relation must name the same parameters and tangents.",
                    "Reference the relation twice in the FROM list, once per set of tangents.", calls[j].fe->location);
      group.push_back(j);
      done[j] = 1;
    }
    Query *q = first.stack[out.level];
    RangeTblEntry *rte = rt_fetch(out.rtindex, q->rtable);
    std::vector<Scope> scopes(first.stack.size());
    for (size_t k = 0; k < scopes.size(); k++) scopes[k] = Scope{first.stack[k], k ? &scopes[k - 1] : nullptr};
    std::string sql;
    std::vector<Param *> extern_params;
    size_t ncols = 0;
    try {
      std::vector<ParamTarget> params = PairParams(first.fe, texts);
      Translator tr(params, stop_oids);
      RelP rel;
      if (rte->rtekind == RTE_CTE) {
        int owner = -1;
        CommonTableExpr *cte = CteOf(first.stack, out.level, rte, owner);
        rel = tr.TranslateCte(cte, &scopes[owner]);
      } else if (rte->rtekind == RTE_SUBQUERY)
        rel = tr.TranslateQuery(rte->subquery, &scopes[out.level]);
      else
        rel = tr.TranslateView(rte->relid);
      std::vector<Tangent> tangents = PairTangents(first.fe, first.stack, out.level, scopes, texts, params, stop_oids);
      sql = BuildTangentSql(rel, tangents);
      extern_params = tr.ExternParams();
      ncols = rel->cols.size();
    } catch (Error &e) {
      if (e.position < 0) e.position = first.fe->location;
      throw;
    }
    Query *sub = AnalyzeTangentSql(sql, extern_params);
    std::vector<JvpOut> outs;  // (resolved before the entry changes: no C++ exception inside PgCall)
    for (size_t j : group) outs.push_back(ResolveJvpOut(calls[j]));
    int owner = -1;
    CommonTableExpr *out_cte = rte->rtekind == RTE_CTE ? CteOf(first.stack, out.level, rte, owner) : nullptr;
    PgCall([&] {
      if (out_cte) out_cte->cterefcount--;
      // the output's range table entry becomes _ddx.jvp_rows(query, params ...)
      // AS (its columns, their tangents)
      Const *text = makeConst(TEXTOID, -1, InvalidOid, -1, CStringGetTextDatum(sql.c_str()), false, false);
      List *args = list_make1(text);
      for (Param *p : extern_params) args = lappend(args, copyObjectImpl(p));
      FuncExpr *call = makeFuncExpr(extern_params.empty() ? oids.jvp_rows : oids.jvp_rows_params, RECORDOID, args,
                                    InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
      call->funcretset = true;
      RangeTblFunction *fn = makeNode(RangeTblFunction);
      fn->funcexpr = (Node *)call;
      ListCell *tl;
      int k = 0;
      foreach (tl, sub->targetList) {
        TargetEntry *te = lfirst_node(TargetEntry, tl);
        if (te->resjunk) continue;
        fn->funccolnames = lappend(fn->funccolnames, makeString(psprintf("c%d", k++)));
        fn->funccoltypes = lappend_oid(fn->funccoltypes, exprType((Node *)te->expr));
        fn->funccoltypmods = lappend_int(fn->funccoltypmods, exprTypmod((Node *)te->expr));
        fn->funccolcollations = lappend_oid(fn->funccolcollations, exprCollation((Node *)te->expr));
      }
      fn->funccolcount = k;
      ForgetRelation(rte);
      rte->rtekind = RTE_FUNCTION;
      rte->functions = list_make1(fn);
      rte->funcordinality = false;
      rte->subquery = NULL;
      rte->ctename = NULL;
      rte->ctelevelsup = 0;
      rte->self_reference = false;
      rte->coltypes = rte->coltypmods = rte->colcollations = NIL;
      List *names = NIL;
      ListCell *lc;
      int n = 0;
      foreach (lc, rte->eref->colnames) {
        if (n++ < static_cast<int>(ncols)) names = lappend(names, lfirst(lc));
      }
      for (size_t j = 0; j < ncols; j++)
        names = lappend(names, makeString(psprintf("jvp_%d", static_cast<int>(j + 1))));
      rte->eref->colnames = names;
      for (size_t g = 0; g < group.size(); g++) {
        const JvpOut &o = outs[g];
        FuncExpr *fe = calls[group[g]].fe;
        fe->funcid = oids.jvp_at;
        fe->funcresulttype = FLOAT8OID;
        fe->funcretset = false;
        fe->funcvariadic = false;
        fe->funcformat = COERCE_EXPLICIT_CALL;
        fe->funccollid = InvalidOid;
        fe->inputcollid = InvalidOid;
        fe->args = list_make1(
            makeVar(o.rtindex, static_cast<AttrNumber>(ncols + o.attno), FLOAT8OID, -1, InvalidOid, o.varlevelsup));
      }
    });
  }
}

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

// Every Query level of a statement (a utility statement's query in its
// place), and every relation its range tables name.
struct Levels {
  std::vector<Query *> queries;
  std::vector<Oid> relids;
};
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

// The refusal of a parameter whose table the loss of group `g` never reads
// (read[p] false): its derivative would be zero, and where the loss calls a
// function ddx cannot see into (`opaque`), the table may be read in there,
// so that zero would be wrong. Each refusal at the position of the first call
// that asks for it.
void RefuseUnread(const std::vector<GradCall> &calls, int g, const std::vector<ParamTarget> &params,
                  const std::vector<bool> &read, const std::vector<std::string> &opaque) {
  for (size_t p = 0; p < params.size(); p++) {
    if (read[p]) continue;
    int position = -1;
    for (const GradCall &call : calls)
      if (call.group == g && call.pidx == static_cast<int>(p) && position < 0) position = call.fe->location;
    std::string table = Str(PgCall([&] {
      return quote_qualified_identifier(get_namespace_name(get_rel_namespace(params[p].relid)),
                                        get_rel_name(params[p].relid));
    }));
    if (!opaque.empty()) {
      std::string fns;
      for (size_t i = 0; i < opaque.size(); i++) fns += (i ? ", " : "") + opaque[i];
      throw Error(sqlstate::kFeatureNotSupported, "ddx cannot see into " + opaque[0] + ", which the loss calls",
                  "The loss reads table " + table + " nowhere else, so it could reach " + params[p].attname +
                      " only inside what ddx cannot differentiate (" + fns +
                      "), whose part of the loss would get no "
                      "gradient.",
                  "Write the loss as a view, a CTE, or an SQL function that PostgreSQL inlines (LANGUAGE sql, one "
                  "SELECT of one expression or a set-returning one SELECT, not SECURITY DEFINER, no SET clause).",
                  position);
    }
    throw Error(sqlstate::kInvalidParameterValue, "the loss does not read table " + table,
                "Column " + params[p].attname + " of " + table +
                    " is not a parameter of this loss: its derivative would be zero for every row.",
                "Ask for the gradient of a column of a table that the loss reads.", position);
  }
}

void RewriteStatement(Query *query, std::vector<Oid> stop_oids) {
  Collector c;
  PgCall([&] { Collect((Node *)query, &c); });
  // Group the calls by loss; each group gets one program.
  std::vector<LossRef> losses;
  std::vector<std::vector<ParamTarget>> params;
  for (GradCall &call : c.calls) {
    RefuseDistributedWrite(call);
    if (!call.value) ResolveParam(call);
    LossRef ref = ResolveLoss(call);
    if (call.hvp) ref.hvp = TextPairs(call.fe, 2);
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
      RelP loss;
      if (!ref.hvp.empty()) {
        // H·v: the loss's jvp along the tangents (forward mode, as SQL), then
        // that query's tangent column differentiated as a loss (reverse mode).
        std::vector<ParamTarget> tparams = PairParams(first->fe, ref.hvp);
        Translator tf(tparams, stop_oids);
        RelP fwd = ref.out.cte ? tf.TranslateCte(ref.out.cte, &scopes[ref.out.owner_level])
                   : OidIsValid(ref.out.view)
                       ? tf.TranslateView(ref.out.view)
                       : tf.TranslateQuery(castNode(Query, ref.out.sublink->subselect), &scopes.back());
        if (fwd->cols.size() != 1 || !fwd->cols[0].differentiable)
          throw Error(sqlstate::kInvalidParameterValue, "the loss must be one row and one number");
        std::vector<Tangent> tangents = PairTangents(first->fe, first->stack, static_cast<int>(first->stack.size()) - 1,
                                                     scopes, ref.hvp, tparams, stop_oids);
        Query *sub = AnalyzeTangentSql(BuildTangentSql(fwd, tangents, TangentUse::Differentiate, oids.stop_sql),
                                       tf.ExternParams());
        RelP rel = tr.TranslateQuery(sub, nullptr);  // (c0, t0): the loss and its tangent
        auto t0 = std::make_shared<ddx::Expr>();
        t0->kind = ExprKind::Col;
        t0->col = 1;
        t0->type = rel->cols.at(1);
        loss = std::make_shared<Rel>();
        loss->kind = RelKind::Project;
        loss->inputs = {rel};
        loss->exprs = {t0};
        loss->cols = {rel->cols[1]};
      } else {
        loss = translate(ref.out);
        if (ref.vjp) loss = VjpLoss(loss, ColumnNames(ref.out), translate(ref.cot), ColumnNames(ref.cot));
      }
      if (loss->cols.size() != 1 || !loss->cols[0].differentiable)
        throw Error(sqlstate::kInvalidParameterValue, "the loss must be one row and one number",
                    loss->cols.size() != 1 ? "The loss has " + std::to_string(loss->cols.size()) + " columns."
                                           : "The loss column is of type " + loss->cols[0].sql + ".",
                    "Compute the loss as a single float8 or numeric value, e.g. SELECT avg(...) AS l.");
      RefuseUnread(c.calls, static_cast<int>(g), params[g], ParamsRead(loss, params[g].size()), tr.OpaqueFunctions());
      bool node = ContractionInPrograms();
      programs[g] = BuildGradientProgram(loss, CitusPlacement::Gathered, node).sql;
      if (ReadsCitusData(loss))
        programs[g] = std::string(kInPlace) + BuildGradientProgram(loss, CitusPlacement::InPlace, node).sql +
                      kGathered + programs[g];
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
        NullTest *nt = makeNode(NullTest);
        nt->arg = (::Expr *)copyObjectImpl(v);
        nt->nulltesttype = IS_NULL;
        nt->argisrow = false;
        nt->location = -1;
        isnull = (Node *)nt;
        toid = (Node *)makeVar(call.base_varno, TableOidAttributeNumber, OIDOID, -1, InvalidOid, v->varlevelsup);
        ctid = (Node *)makeVar(call.base_varno, SelfItemPointerAttributeNumber, TIDOID, -1, InvalidOid, v->varlevelsup);
      }
      if (call.keyed && !call.value) {
        // ROW(the primary key's columns in attribute order)::text, as the
        // program writes a Citus table's row (see CitusParameterTable); the
        // table itself, not the tableoid of whichever shard the row is read from
        Var *v = call.param;
        if (!OidIsValid(oids.grad_key) || !OidIsValid(oids.grad_key_params))
          ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                          errmsg("ddx's SQL objects are older than its library"),
                          errhint("DROP EXTENSION ddx and CREATE EXTENSION ddx again.")));
        RowExpr *row = makeNode(RowExpr);
        row->row_typeid = RECORDOID;
        row->row_format = COERCE_IMPLICIT_CAST;
        row->location = -1;
        for (AttrNumber a : call.key_attnos) {
          Oid type, coll;
          int32 typmod;
          get_atttypetypmodcoll(call.relid, a, &type, &typmod, &coll);
          row->args = lappend(row->args, makeVar(call.base_varno, a, type, typmod, coll, v->varlevelsup));
          row->colnames = lappend(row->colnames, makeString(get_attname(call.relid, a, false)));
        }
        CoerceViaIO *io = makeNode(CoerceViaIO);
        io->arg = (::Expr *)row;
        io->resulttype = TEXTOID;
        io->resultcollid = DEFAULT_COLLATION_OID;
        io->coerceformat = COERCE_EXPLICIT_CAST;
        io->location = -1;
        toid = (Node *)makeConst(OIDOID, -1, InvalidOid, 4, ObjectIdGetDatum(call.relid), false, true);
        ctid = (Node *)io;
        fe->funcid = extern_params[call.group].empty() ? oids.grad_key : oids.grad_key_params;
      } else {
        fe->funcid = extern_params[call.group].empty() ? oids.grad_at : oids.grad_at_params;
      }
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
  if (!c.calls.empty() &&
      PgCall([] { return OidIsValid(get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE)); })) {
    Levels levels;
    PgCall([&] { CollectLevels((Node *)query, &levels); });
    PgCall([&] {
      for (Query *q : levels.queries) DropUnreadCtes(q);
    });
    levels = Levels();
    PgCall([&] { CollectLevels((Node *)query, &levels); });
    for (Query *q : levels.queries) GatherLevel(q, c.calls.front().fe->location);
  }
  RewriteJvps(c.jvps, stop_oids);
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

int StopGradientOids(Oid out[2]) {
  int n = 0;
  if (!LookupOids()) return 0;
  for (Oid o : oids.stop)
    if (OidIsValid(o)) out[n++] = o;
  return n;
}

void InstallHook() {
  prev_post_parse_analyze_hook = post_parse_analyze_hook;
  post_parse_analyze_hook = PostParseAnalyze;
  CacheRegisterSyscacheCallback(PROCOID, ForgetOids, (Datum)0);
}

}  // namespace ddx::pg
