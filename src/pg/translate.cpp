// Query -> IR (see translate.h).
#include "ddx/pg/translate.h"

#include <algorithm>
#include <cstring>

#include "ddx/core/agg_rules.h"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_class.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_language.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "rewrite/rewriteManip.h"
#include "access/stratnum.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/fmgroids.h"
#include "utils/syscache.h"
}

namespace ddx::pg {

using ColMap = std::map<std::pair<int, int>, int>;

// var_pop, var_samp and the stddevs are computed from their group's mean:
// Σ (x - mean)² over the rows, divided by n (Population) or n - 1 (Sample),
// so that their derivatives are those of the two-pass formula (exact, where
// Σ x² - (Σ x)² / n cancels).
enum class Spread { None, Population, Sample };

// An aggregate call of a grouped query, planned: its function, its argument
// over the rows (nullptr: count(*)), its type.
struct Translator::AggPlan {
  std::string fn;
  ExprP arg;
  Type type;
  Spread spread = Spread::None;
  bool root = false;  // a standard deviation: the square root of the variance
};

// An aggregate call's value after aggregation: column `col` of the
// aggregate; for a variance, Σ (x - mean)² there (col) and the count.
struct AggOut {
  int col = -1;
  int count = -1;
  Spread form = Spread::None;
  bool root = false;
  Type type;
};

// The context an expression is translated in.
struct Translator::Ctx {
  const ColMap *map = nullptr;  // (varno, varattno) -> column, for Vars of this level
  Query *q = nullptr;
  int side = 0;                // side of this level's columns
  const Ctx *outer = nullptr;  // the level a correlated reference (varlevelsup 1) points to
  const Scope *scope = nullptr;
  // After aggregation: expressions equal() to a group key or an aggregate
  // become columns; nothing else may reference the input.
  const std::vector<Node *> *group_exprs = nullptr;
  const std::vector<Node *> *aggrefs = nullptr;
  const std::vector<AggOut> *agg_outs = nullptr;               // per aggref: its value over the aggregate's columns
  const std::map<const SubLink *, int> *scalars = nullptr;     // scalar sublink -> column
  const std::map<const WindowFunc *, int> *windows = nullptr;  // window function -> column
  const std::vector<ExprP> *sublink_params = nullptr;          // PARAM_SUBLINK id-1 -> value
  ExprP case_test;
};

namespace {

// What a user wrote, for an expression node the loss cannot contain.
std::string UnsupportedName(const Node *n) {
  switch (nodeTag(n)) {
    case T_SubscriptingRef:
      return "a subscript (x[i])";
    case T_FieldSelect:
      return "a field of a composite value ((x).f)";
    case T_FieldStore:
      return "an assignment to a field of a composite value";
    case T_RowExpr:
      return "a row constructor (ROW(...) or (a, b))";
    case T_RowCompareExpr:
      return "a row comparison ((a, b) < (c, d))";
    case T_ArrayCoerceExpr:
      return "a cast of an array";
    case T_ConvertRowtypeExpr:
      return "a cast of a row type";
    case T_CollateExpr:
      return "a COLLATE clause";
    case T_SQLValueFunction:
      return "a special value function (CURRENT_DATE, CURRENT_USER, ...)";
    case T_XmlExpr:
      return "an XML expression";
    case T_CoerceToDomain:
      return "a cast to a domain";
    case T_NextValueExpr:
      return "a sequence's next value";
    case T_GroupingFunc:
      return "GROUPING()";
    default:
      return "an expression of node type " + std::to_string(static_cast<int>(nodeTag(n)));
  }
}

[[noreturn]] void Refuse(const std::string &what, const std::string &detail = "", const std::string &hint = "") {
  throw Error(sqlstate::kFeatureNotSupported, what, detail, hint);
}

// --- catalog helpers: each one PostgreSQL call behind PgCall ---------------

std::string Str(const char *s) { return s ? std::string(s) : std::string(); }

std::string TypeSql(Oid typid, int32 typmod) {
  if (typid == FLOAT8OID) return "pg_catalog.float8";
  if (typid == FLOAT4OID) return "pg_catalog.float4";
  return Str(PgCall(
      [&] { return format_type_extended(typid, typmod, FORMAT_TYPE_FORCE_QUALIFY | FORMAT_TYPE_TYPEMOD_GIVEN); }));
}

Type MakeType(Oid typid, int32 typmod) {
  return Type{TypeSql(typid, typmod), typid == FLOAT8OID || typid == FLOAT4OID || typid == NUMERICOID};
}

Type ExprTypeOf(Node *n) { return MakeType(exprType(n), exprTypmod(n)); }

std::string Qualified(Oid nsp, const char *name) {
  return Str(PgCall([&] { return quote_qualified_identifier(get_namespace_name(nsp), name); }));
}

struct FuncInfo {
  std::string qualified;  // schema.name, quoted
  std::string name;       // for messages
  std::string internal;   // prosrc of a pg_catalog internal function, else ""
  bool is_volatile = false;
  bool retset = false;
  bool strict = false;
  bool sql = false;      // LANGUAGE sql: PostgreSQL may inline it
  bool builtin = false;  // of pg_catalog
};

FuncInfo Func(Oid funcid) {
  FuncInfo fi;
  struct Raw {
    char *qualified;
    char *name;
    char *internal;
    char vol;
    bool retset;
    bool strict;
    bool sql;
    bool builtin;
  };
  Raw raw = PgCall([&] {
    Raw r{nullptr, nullptr, nullptr, 'v', false, false, false, false};
    HeapTuple tp = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
    if (!HeapTupleIsValid(tp)) elog(ERROR, "cache lookup failed for function %u", funcid);
    Form_pg_proc p = (Form_pg_proc)GETSTRUCT(tp);
    r.name = pstrdup(NameStr(p->proname));
    r.qualified = quote_qualified_identifier(get_namespace_name(p->pronamespace), NameStr(p->proname));
    r.vol = p->provolatile;
    r.retset = p->proretset;
    r.strict = p->proisstrict;
    r.sql = p->prolang == SQLlanguageId;
    r.builtin = p->pronamespace == PG_CATALOG_NAMESPACE;
    if (p->pronamespace == PG_CATALOG_NAMESPACE && p->prolang == INTERNALlanguageId) {
      bool isnull;
      Datum src = SysCacheGetAttr(PROCOID, tp, Anum_pg_proc_prosrc, &isnull);
      if (!isnull) r.internal = TextDatumGetCString(src);
    }
    ReleaseSysCache(tp);
    return r;
  });
  fi.qualified = Str(raw.qualified);
  fi.name = Str(raw.name);
  fi.internal = Str(raw.internal);
  fi.is_volatile = raw.vol == PROVOLATILE_VOLATILE;
  fi.retset = raw.retset;
  fi.strict = raw.strict;
  fi.sql = raw.sql;
  fi.builtin = raw.builtin;
  return fi;
}

// --- inlining SQL functions, as PostgreSQL inlines them -------------------

// A function's body being translated, for as long as this lives: on the
// translator's stack of them (a recursive function is inlined once).
struct Inlining {
  std::vector<Oid> &stack;
  Inlining(std::vector<Oid> &s, Oid f) : stack(s) { stack.push_back(f); }
  ~Inlining() { stack.pop_back(); }
  Inlining(const Inlining &) = delete;
  Inlining &operator=(const Inlining &) = delete;
};
//
// A call of an SQL function that PostgreSQL would inline computes exactly its
// body, so ddx differentiates the body. Whether it inlines is PostgreSQL's
// own decision (inline_function: one SELECT of one expression, no FROM, not
// SECURITY DEFINER, no SET, no more volatile than declared, strict only over
// strict constructs that use every argument), asked by running
// eval_const_expressions on the call with a stand-in Param per argument: the
// stand-ins are cheap and stable, so PostgreSQL's limits on arguments used
// twice (their cost, their volatility) do not apply; those limits protect
// execution time, not the value, which a non-volatile body computes either
// way (a volatile argument is refused on the gradient path anyway). The
// stand-ins are then replaced by the argument nodes themselves, not copies:
// the translator finds a Query's scalar subqueries and window functions by
// node, and its aggregates and group keys by equal().

// PARAM_EXEC ids of the stand-ins (no Query of a loss holds PARAM_EXEC
// Params: they appear only in plans).
constexpr int kStandIn = 0x7DD00000;

Node *PutArgsBack(Node *node, List *args) {
  if (!node) return nullptr;
  if (IsA(node, Param)) {
    auto *p = castNode(Param, node);
    if (p->paramkind == PARAM_EXEC && p->paramid >= kStandIn && p->paramid < kStandIn + list_length(args))
      return (Node *)list_nth(args, p->paramid - kStandIn);
  }
  return expression_tree_mutator(node, (Node * (*)()) PutArgsBack, (void *)args);
}

// The body of the call funcid(args) as PostgreSQL inlines it, over the
// argument nodes; nullptr where PostgreSQL would not inline it.
Node *InlinedBody(Oid funcid, Oid rettype, Oid retcoll, Oid inputcoll, List *args, bool variadic) {
  return PgCall([&]() -> Node * {
    List *stand_ins = NIL, *inner = NIL;
    int i = 0;
    ListCell *lc;
    foreach (lc, args) {
      Node *a = (Node *)lfirst(lc);
      Node *value = IsA(a, NamedArgExpr) ? (Node *)castNode(NamedArgExpr, a)->arg : a;
      Param *p = makeNode(Param);
      p->paramkind = PARAM_EXEC;
      p->paramid = kStandIn + i++;
      p->paramtype = exprType(value);
      p->paramtypmod = exprTypmod(value);
      p->paramcollid = exprCollation(value);
      p->location = -1;
      Node *s = (Node *)p;
      if (IsA(a, NamedArgExpr)) {
        auto *na = (NamedArgExpr *)copyObjectImpl(a);
        na->arg = (::Expr *)p;
        s = (Node *)na;
      }
      stand_ins = lappend(stand_ins, s);
      inner = lappend(inner, value);
    }
    FuncExpr *call = makeFuncExpr(funcid, rettype, stand_ins, retcoll, inputcoll, COERCE_EXPLICIT_CALL);
    call->funcvariadic = variadic;
    Node *out = eval_const_expressions(nullptr, (Node *)call);
    if (IsA(out, FuncExpr) && castNode(FuncExpr, out)->funcid == funcid) return nullptr;
    return PutArgsBack(out, inner);
  });
}

// The Query a set-returning SQL function in FROM is, as PostgreSQL inlines
// it (inline_set_returning_function, whose rules it applies: one SELECT, the
// function STABLE or IMMUTABLE, not STRICT, not SECURITY DEFINER, no SET, no
// volatile or subquery argument), or nullptr. It plans nothing: the
// PlannerInfo is the little it reads (where it records the function as a
// dependency of a plan).
Query *InlinedSetReturning(RangeTblEntry *rte) {
  return PgCall([&]() -> Query * {
    PlannerInfo *root = makeNode(PlannerInfo);
    root->glob = makeNode(PlannerGlobal);
    root->query_level = 1;
    root->planner_cxt = CurrentMemoryContext;
    return inline_set_returning_function(root, rte);
  });
}

// The derivative rule of a pg_catalog built-in, by its C symbol; "" if none.
const char *RuleOf(const std::string &internal) {
  static const struct {
    const char *src, *rule;
  } kMap[] = {
      {"float4pl", "add"},
      {"float8pl", "add"},
      {"float48pl", "add"},
      {"float84pl", "add"},
      {"numeric_add", "add"},
      {"float4mi", "sub"},
      {"float8mi", "sub"},
      {"float48mi", "sub"},
      {"float84mi", "sub"},
      {"numeric_sub", "sub"},
      {"float4mul", "mul"},
      {"float8mul", "mul"},
      {"float48mul", "mul"},
      {"float84mul", "mul"},
      {"numeric_mul", "mul"},
      {"float4div", "div"},
      {"float8div", "div"},
      {"float48div", "div"},
      {"float84div", "div"},
      {"numeric_div", "div"},
      {"float4um", "neg"},
      {"float8um", "neg"},
      {"numeric_uminus", "neg"},
      {"float4up", "pos"},
      {"float8up", "pos"},
      {"numeric_uplus", "pos"},
      {"dexp", "exp"},
      {"numeric_exp", "exp"},
      {"dlog1", "ln"},
      {"numeric_ln", "ln"},
      {"dlog10", "log10"},
      {"dsqrt", "sqrt"},
      {"numeric_sqrt", "sqrt"},
      {"dpow", "pow"},
      {"numeric_power", "pow"},
      {"dsign", "sign"},
      {"numeric_sign", "sign"},
      {"float4abs", "abs"},
      {"float8abs", "abs"},
      {"numeric_abs", "abs"},
      {"dsin", "sin"},
      {"dcos", "cos"},
      {"dtan", "tan"},
      {"dasin", "asin"},
      {"dacos", "acos"},
      {"datan", "atan"},
      {"dsinh", "sinh"},
      {"dcosh", "cosh"},
      {"dtanh", "tanh"},
      {"ftod", "cast"},
      {"dtof", "cast"},
      {"numeric_float8", "cast"},
      {"numeric_float4", "cast"},
      {"float8_numeric", "cast"},
      {"float4_numeric", "cast"},
      {"i2tod", "cast"},
      {"i4tod", "cast"},
      {"i8tod", "cast"},
      {"i2tof", "cast"},
      {"i4tof", "cast"},
      {"i8tof", "cast"},
      {"int4_numeric", "cast"},
      {"int8_numeric", "cast"},
      {"int2_numeric", "cast"},
  };
  if (internal.empty()) return "";
  for (const auto &m : kMap)
    if (internal == m.src) return m.rule;
  return "";
}

std::string ConstSql(Const *c) {
  std::string type = TypeSql(c->consttype, c->consttypmod);
  if (c->constisnull) return "NULL::" + type;
  std::string lit = Str(PgCall([&] {
    Oid out;
    bool varlena;
    getTypeOutputInfo(c->consttype, &out, &varlena);
    return quote_literal_cstr(OidOutputFunctionCall(out, c->constvalue));
  }));
  return "(" + lit + "::" + type + ")";
}

std::string OperatorSql(Oid opno) {
  return Str(PgCall([&] {
    HeapTuple tp = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
    if (!HeapTupleIsValid(tp)) elog(ERROR, "cache lookup failed for operator %u", opno);
    Form_pg_operator op = (Form_pg_operator)GETSTRUCT(tp);
    char *s = psprintf("OPERATOR(%s.%s)", quote_identifier(get_namespace_name(op->oprnamespace)), NameStr(op->oprname));
    ReleaseSysCache(tp);
    return s;
  }));
}

int RelNatts(Oid relid) {
  return PgCall([&] {
    HeapTuple tp = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
    if (!HeapTupleIsValid(tp)) elog(ERROR, "cache lookup failed for relation %u", relid);
    int n = ((Form_pg_class)GETSTRUCT(tp))->relnatts;
    ReleaseSysCache(tp);
    return n;
  });
}

bool InSameInheritanceTree(Oid a, Oid b) {
  if (a == b) return true;
  return PgCall([&] {
    return list_member_oid(find_all_inheritors(a, NoLock, NULL), b) ||
           list_member_oid(find_all_inheritors(b, NoLock, NULL), a);
  });
}

ExprP MakeCol(int col, int side, Type t) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Col;
  e->col = col;
  e->side = side;
  e->type = std::move(t);
  return e;
}

ExprP MakeOpaque(std::string tmpl, std::string name, std::vector<ExprP> args, Type t, bool vol = false) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Opaque;
  e->text = std::move(tmpl);
  e->name = std::move(name);
  e->args = std::move(args);
  e->type = std::move(t);
  e->is_volatile = vol;
  return e;
}

ExprP MakeCall(std::string rule, std::vector<ExprP> args, Type t) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Call;
  e->text = std::move(rule);
  e->args = std::move(args);
  e->type = std::move(t);
  return e;
}

const Type kBool{"pg_catalog.bool", false};
const Type kFloat8{"pg_catalog.float8", true};

ExprP NullOf(const Type &t) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Const;
  e->type = t;
  e->text = "NULL::" + t.sql;
  return e;
}

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

std::string Placeholders(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; i++) s += (i ? ", $" : "$") + std::to_string(i + 1);
  return s;
}

// Scalar (EXPR) sublinks of one query level, not descending into subqueries.
bool CollectScalarSublinks(Node *n, std::vector<SubLink *> *out) {
  if (!n) return false;
  if (IsA(n, Query)) return false;
  if (IsA(n, SubLink)) {
    auto *sl = castNode(SubLink, n);
    if (sl->subLinkType == EXPR_SUBLINK && std::find(out->begin(), out->end(), sl) == out->end()) out->push_back(sl);
    return CollectScalarSublinks(sl->testexpr, out);
  }
  return expression_tree_walker(n, (bool (*)())CollectScalarSublinks, out);
}

bool CollectAggrefs(Node *n, std::vector<Node *> *out) {
  if (!n) return false;
  if (IsA(n, Query)) return false;
  if (IsA(n, Aggref)) {
    for (Node *a : *out)
      if (equal(a, n)) return false;
    out->push_back(n);
    return false;
  }
  return expression_tree_walker(n, (bool (*)())CollectAggrefs, out);
}

RelP NewRel(RelKind k) {
  auto r = std::make_shared<Rel>();
  r->kind = k;
  return r;
}

RelP MakeJoin(RelP l, RelP r, JoinKind jk, ExprP cond) {
  RelP j = NewRel(RelKind::Join);
  j->cols = l->cols;
  j->cols.insert(j->cols.end(), r->cols.begin(), r->cols.end());
  j->inputs = {std::move(l), std::move(r)};
  j->join = jk;
  j->cond = std::move(cond);
  return j;
}

RelP MakeFilter(RelP in, ExprP cond) {
  RelP f = NewRel(RelKind::Filter);
  f->cols = in->cols;
  f->inputs = {std::move(in)};
  f->cond = std::move(cond);
  return f;
}

RelP MakeProject(RelP in, std::vector<ExprP> exprs) {
  RelP p = NewRel(RelKind::Project);
  for (const auto &e : exprs) p->cols.push_back(e->type);
  p->inputs = {std::move(in)};
  p->exprs = std::move(exprs);
  return p;
}

ExprP AndAll(const std::vector<ExprP> &v) {
  if (v.empty()) return nullptr;
  if (v.size() == 1) return v[0];
  std::string t;
  for (size_t i = 0; i < v.size(); i++) t += (i ? " AND $" : "($") + std::to_string(i + 1);
  return MakeOpaque(t + ")", "AND", v, kBool);
}

bool CollectWindowFuncs(Node *n, std::vector<WindowFunc *> *out) {
  if (!n) return false;
  if (IsA(n, Query)) return false;
  if (IsA(n, WindowFunc)) {
    out->push_back(castNode(WindowFunc, n));
    return false;
  }
  return expression_tree_walker(n, (bool (*)())CollectWindowFuncs, out);
}

void CheckQuery(Query *q) {
  if (q->commandType != CMD_SELECT || q->hasModifyingCTE)
    Refuse("data-modifying statement in the loss", "The loss and the relations it reads must be SELECT queries.");
  if (q->hasRecursive) Refuse("recursive query in the loss", "WITH RECURSIVE has no reverse rule.");
  if (q->hasTargetSRFs) Refuse("set-returning function in a target list of the loss");
  if (q->groupingSets) Refuse("GROUPING SETS, ROLLUP or CUBE in the loss");
  if (q->hasDistinctOn) Refuse("DISTINCT ON in the loss", "", "Use GROUP BY with MIN or MAX.");
  if (q->hasForUpdate || q->rowMarks) Refuse("FOR UPDATE or FOR SHARE in the loss");
  if (q->limitOption == LIMIT_OPTION_WITH_TIES) Refuse("FETCH ... WITH TIES in the loss");
}

}  // namespace

// Citus keeps its tables in the catalog table pg_catalog.pg_dist_partition
// (logicalrelid regclass, partmethod "char": 'h' hash, 'r' range, 'a' append
// for distributed tables, 'n' none; repmodel "char": 't' for a reference
// table; partkey text: the distribution column as nodeToString of its Var),
// which exists only where the citus extension is created. ddx reads it by
// name, without linking Citus; a heap scan under the catalog snapshot, the
// table having one row per Citus table.
std::string CitusTableKind(Oid relid, bool *hash, AttrNumber *column) {
  struct Raw {
    char method, model;
    AttrNumber column;
  };
  Raw raw = PgCall([&] {
    Raw r{0, 0, InvalidAttrNumber};
    Oid cat = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE);
    if (!OidIsValid(cat)) return r;
    AttrNumber method = get_attnum(cat, "partmethod"), model = get_attnum(cat, "repmodel"),
               partkey = get_attnum(cat, "partkey");
    Relation rel = table_open(cat, AccessShareLock);
    ScanKeyData key;
    ScanKeyInit(&key, get_attnum(cat, "logicalrelid"), BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
    SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, nullptr, 1, &key);
    HeapTuple tup = systable_getnext(scan);
    if (HeapTupleIsValid(tup)) {
      bool isnull = true;
      Datum d = heap_getattr(tup, method, RelationGetDescr(rel), &isnull);
      r.method = isnull ? '?' : DatumGetChar(d);
      d = heap_getattr(tup, model, RelationGetDescr(rel), &isnull);
      r.model = isnull ? '?' : DatumGetChar(d);
      d = partkey == InvalidAttrNumber ? 0 : heap_getattr(tup, partkey, RelationGetDescr(rel), &isnull);
      if (r.method == 'h' && partkey != InvalidAttrNumber && !isnull) {
        Node *key = static_cast<Node *>(stringToNode(TextDatumGetCString(d)));
        if (key && IsA(key, Var)) r.column = castNode(Var, key)->varattno;
      }
    }
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    return r;
  });
  if (hash) *hash = raw.method == 'h';
  if (column) *column = raw.column;
  if (!raw.method) return "";
  if (raw.method == 'h' || raw.method == 'r' || raw.method == 'a') return "distributed table";
  if (raw.model == 't') return "reference table";
  return "table managed by Citus";
}

// Forward mode (jvp, hvp) does not run over Citus tables yet: its tangent
// query would be planned by Citus as a whole, and joins parameter rows to
// their tangents in ways Citus has not been shown to run exactly.
void RefuseCitusTable(Oid relid, const std::string &name, const std::string &role) {
  std::string kind = CitusTableKind(relid);
  if (kind.empty()) return;
  throw Error(sqlstate::kFeatureNotSupported,
              "jvp and hvp do not run over Citus tables yet: " + role + " " + name + " is a Citus " + kind,
              "Reverse mode (grad, vjp, the optimizers, ddx_train) does.",
              "Take the derivative with grad or vjp, or run jvp over plain tables (CREATE TABLE ... AS SELECT ...).");
}

std::vector<AttrNumber> PrimaryKeyAttnos(Oid relid) {
  return PgCall([&] {
    std::vector<AttrNumber> out;
    Oid constraint = InvalidOid;
    Bitmapset *keys = get_primary_key_attnos(relid, false, &constraint);
    int i = -1;
    while ((i = bms_next_member(keys, i)) >= 0) out.push_back(i + FirstLowInvalidHeapAttributeNumber);
    return out;
  });
}

// The attribute numbers of each unique index of relid that says at most one
// row matches an equality on all its columns, in every snapshot: valid,
// immediate (a deferred constraint may be violated until commit), without a
// predicate or an expression column. What the planner asks of an index
// before it removes a join or marks one unique (relation_has_unique_index_for,
// analyzejoins.c).
std::vector<std::vector<AttrNumber>> UniqueIndexAttnos(Oid relid) {
  // (collected as Lists, palloc'd: no C++ object lives where an error may
  // longjmp)
  List *sets = PgCall([&] {
    List *found = NIL;
    Relation rel = table_open(relid, AccessShareLock);
    List *indexes = RelationGetIndexList(rel);
    ListCell *lc;
    foreach (lc, indexes) {
      HeapTuple tp = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
      if (!HeapTupleIsValid(tp)) continue;
      Form_pg_index ix = (Form_pg_index)GETSTRUCT(tp);
      bool usable = ix->indisunique && ix->indimmediate && ix->indisvalid &&
                    heap_attisnull(tp, Anum_pg_index_indpred, NULL) && heap_attisnull(tp, Anum_pg_index_indexprs, NULL);
      List *cols = NIL;
      for (int i = 0; usable && i < ix->indnkeyatts; i++) {
        usable = ix->indkey.values[i] > 0;
        cols = lappend_int(cols, ix->indkey.values[i]);
      }
      if (usable) found = lappend(found, cols);
      ReleaseSysCache(tp);
    }
    list_free(indexes);
    table_close(rel, AccessShareLock);
    return found;
  });
  std::vector<std::vector<AttrNumber>> out;
  ListCell *lc, *c;
  foreach (lc, sets) {
    out.emplace_back();
    foreach (c, static_cast<List *>(lfirst(lc))) out.back().push_back(static_cast<AttrNumber>(lfirst_int(c)));
  }
  return out;
}

// A parameter's table on Citus: a reference table, a table that Citus
// manages on the coordinator, or a table hash-distributed by (a column of)
// its primary key, an embedding; its rows identified by their primary key
// (its placements do not share ctids). A range- or append-distributed table
// is refused (create_distributed_table makes hash tables; ddx places the
// optimizer state of a distributed table co-located with it, which only
// hash distribution offers).
bool CitusParameterTable(Oid relid, const std::string &name, bool *distributed) {
  bool hash = false;
  std::string kind = CitusTableKind(relid, &hash);
  if (distributed) *distributed = kind == "distributed table";
  if (kind.empty()) return false;
  if (kind == "distributed table" && !hash)
    throw Error(sqlstate::kFeatureNotSupported,
                "ddx does not take parameters from a range- or append-distributed table: " + name + " is one",
                "ddx keeps a distributed parameter table's optimizer state co-located with it, which needs hash "
                "distribution.",
                "Distribute the parameters by hash (create_distributed_table), or keep them in a reference table.");
  if (PgCall([&] { return get_rel_relkind(relid); }) != RELKIND_RELATION)
    throw Error(sqlstate::kFeatureNotSupported,
                "ddx does not take parameters from a partitioned Citus table yet: " + name + " is one");
  if (PrimaryKeyAttnos(relid).empty())
    throw Error(sqlstate::kFeatureNotSupported,
                "the parameter's table " + name + " is a Citus " + kind + " without a primary key",
                "On Citus, ddx identifies a parameter row by its primary key: the table's placements do not keep "
                "rows at the same physical positions.",
                "Add a primary key: ALTER TABLE " + name + " ADD PRIMARY KEY (...).");
  return true;
}

Translator::Translator(std::vector<ParamTarget> params, std::vector<Oid> stop_gradient_oids)
    : params_(std::move(params)), stop_oids_(std::move(stop_gradient_oids)) {}

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

// The translated body of an SQL function's call, where PostgreSQL would
// inline it (see InlinedBody); nullptr otherwise. A function whose body is
// being translated is not inlined again inside it (a recursive function
// stays a call, as PostgreSQL leaves it).
ExprP Translator::Inlined(Oid funcid, Oid rettype, Oid retcoll, Oid inputcoll, List *args, bool variadic,
                          const Ctx &c) {
  if (std::find(inlining_.begin(), inlining_.end(), funcid) != inlining_.end()) return nullptr;
  Node *body = InlinedBody(funcid, rettype, retcoll, inputcoll, args, variadic);
  if (!body) return nullptr;
  Inlining in(inlining_, funcid);
  return Expr(body, c);
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
    if (rte->funcordinality) types.push_back(Type{"pg_catalog.int8", false});
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
    auto one = std::make_shared<ddx::Expr>();
    one->kind = ExprKind::Const;
    one->text = "1";
    one->type = Type{"pg_catalog.int4", false};
    rel->rows = {{one}};
    rel->cols = {one->type};
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

SortKey TranslateSortKey(SortGroupClause *sgc, int col) {
  SortKey k;
  k.col = col;
  k.nulls_first = sgc->nulls_first;
  Oid opfamily, opcintype;
  int16 strategy;
  bool ok = PgCall([&] { return get_ordering_op_properties(sgc->sortop, &opfamily, &opcintype, &strategy); });
  if (!ok) Refuse("ORDER BY with a non-btree operator in the loss");
  k.desc = strategy == BTGreaterStrategyNumber;
  return k;
}

}  // namespace

// A window call's first argument over the rows (nullptr: count(*)), with
// its FILTER (WHERE ...) made part of it (see Filtered).
ExprP Translator::WindowArg(WindowFunc *f, const Ctx &c) {
  ExprP arg = !f->winstar && list_length(f->args) >= 1 ? Expr((Node *)linitial(f->args), c) : nullptr;
  if (f->aggfilter) arg = Filtered(Expr((Node *)f->aggfilter, c), arg);
  return arg;
}

RelP Translator::JoinWindows(Query *q, RelP rel, const Ctx &c, std::map<const WindowFunc *, int> &out) {
  std::vector<WindowFunc *> funcs;
  ListCell *lc;
  foreach (lc, q->targetList) CollectWindowFuncs((Node *)lfirst_node(TargetEntry, lc)->expr, &funcs);
  foreach (lc, q->windowClause) {
    auto *wc = lfirst_node(WindowClause, lc);
    std::vector<WindowFunc *> mine;
    std::vector<FuncInfo> infos;
    bool all_aggregates = true;
    for (WindowFunc *f : funcs) {
      if (f->winref != wc->winref) continue;
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
      all_aggregates = all_aggregates && f->winagg;
      mine.push_back(f);
      infos.push_back(fi);
    }
    if (mine.empty()) continue;
    std::vector<ExprP> pre;
    ListCell *lk;
    foreach (lk, wc->partitionClause)
      pre.push_back(Expr((Node *)get_sortgroupclause_expr(lfirst_node(SortGroupClause, lk), q->targetList), c));
    int n = static_cast<int>(rel->cols.size());

    if (all_aggregates && WholePartition(wc)) {
      RelP agg = NewRel(RelKind::Aggregate);
      agg->nkeys = static_cast<int>(pre.size());
      for (const auto &k : pre) agg->cols.push_back(k->type);
      for (size_t i = 0; i < mine.size(); i++) {
        AggCall call;
        call.fn = infos[i].name;
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
      rel = MakeJoin(rel, agg, JoinKind::Inner, AndAll(conds));
      continue;
    }

    // A Window relation over rel's columns ++ partition keys ++ order keys ++
    // arguments.
    std::vector<ExprP> cols;
    for (int i = 0; i < n; i++) cols.push_back(MakeCol(i, 0, rel->cols[i]));
    RelP w = NewRel(RelKind::Window);
    auto add = [&](const ExprP &e) {
      cols.push_back(e);
      return static_cast<int>(cols.size()) - 1;
    };
    for (const auto &p : pre) w->partition.push_back(add(p));
    foreach (lk, wc->orderClause) {
      auto *sgc = lfirst_node(SortGroupClause, lk);
      int col = add(Expr((Node *)get_sortgroupclause_expr(sgc, q->targetList), c));
      w->order.push_back(TranslateSortKey(sgc, col));
    }
    w->frame = TranslateFrame(wc);
    for (size_t i = 0; i < mine.size(); i++) {
      WindowFunc *f = mine[i];
      WinCall call;
      call.fn = infos[i].name;
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
    rel = w;
  }
  return rel;
}

RelP Translator::SetOp(Query *q, Node *n, const Scope *scope) {
  if (IsA(n, RangeTblRef)) {
    RangeTblEntry *rte = rt_fetch(castNode(RangeTblRef, n)->rtindex, q->rtable);
    return TranslateQuery(rte->subquery, scope);
  }
  auto *so = castNode(SetOperationStmt, n);
  if (so->op != SETOP_UNION) Refuse("INTERSECT or EXCEPT in the loss", "Only UNION and UNION ALL have a reverse rule.");
  RelP u = NewRel(RelKind::UnionAll);
  u->inputs = {SetOp(q, so->larg, scope), SetOp(q, so->rarg, scope)};
  ListCell *lt, *lm;
  forboth(lt, so->colTypes, lm, so->colTypmods) u->cols.push_back(MakeType(lfirst_oid(lt), lfirst_int(lm)));
  if (so->all) return u;
  RelP d = NewRel(RelKind::Aggregate);
  d->cols = u->cols;
  d->inputs = {u};
  d->nkeys = static_cast<int>(u->cols.size());
  d->distinct = true;
  return d;
}

RelP Translator::TranslateQuery(Query *q, const Scope *parent) {
  CheckQuery(q);
  Scope scope{q, parent};
  RelP rel;
  std::vector<ExprP> outputs;
  std::vector<TargetEntry *> tlist;
  ListCell *lc;
  foreach (lc, q->targetList) tlist.push_back(lfirst_node(TargetEntry, lc));

  if (q->setOperations) {
    rel = SetOp(q, q->setOperations, &scope);
    if (tlist.size() != rel->cols.size()) Refuse("set operation with extra target entries in the loss");
  } else {
    ColMap map;
    rel = FromList(q, q->jointree->fromlist, nullptr, &scope, map);
    std::vector<SubLink *> links;
    CollectScalarSublinks(q->jointree->quals, &links);
    for (TargetEntry *te : tlist) CollectScalarSublinks((Node *)te->expr, &links);
    CollectScalarSublinks(q->havingQual, &links);
    std::map<const SubLink *, int> pre;
    rel = JoinScalars(rel, links, &scope, pre);
    Ctx c;
    c.map = &map;
    c.q = q;
    c.scope = &scope;
    c.scalars = &pre;
    if (q->jointree->quals) rel = MakeFilter(rel, Expr(q->jointree->quals, c));
    if (q->hasAggs || q->groupClause || q->havingQual) {
      std::vector<Node *> groups, aggrefs;
      foreach (lc, q->groupClause)
        groups.push_back((Node *)get_sortgroupclause_expr(lfirst_node(SortGroupClause, lc), q->targetList));
      for (TargetEntry *te : tlist) CollectAggrefs((Node *)te->expr, &aggrefs);
      CollectAggrefs(q->havingQual, &aggrefs);
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
      std::vector<AggOut> outs;
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
            o.count = add("count", pl.arg, Type{"pg_catalog.int8", false});
          }
        }
        outs.push_back(o);
      }
      agg->inputs = {MakeProject(rel, pre_exprs)};
      std::map<const SubLink *, int> post;
      rel = JoinScalars(agg, links, &scope, post);
      Ctx pc;
      pc.q = q;
      pc.scope = &scope;
      pc.group_exprs = &groups;
      pc.aggrefs = &aggrefs;
      pc.agg_outs = &outs;
      pc.scalars = &post;
      if (q->havingQual) rel = MakeFilter(rel, Expr(q->havingQual, pc));
      // Windows run over the groups, after HAVING.
      std::map<const WindowFunc *, int> windows;
      if (q->hasWindowFuncs) rel = JoinWindows(q, rel, pc, windows);
      pc.windows = &windows;
      for (TargetEntry *te : tlist) outputs.push_back(Expr((Node *)te->expr, pc));
    } else {
      std::map<const WindowFunc *, int> windows;
      if (q->hasWindowFuncs) rel = JoinWindows(q, rel, c, windows);
      Ctx wc = c;
      wc.windows = &windows;
      for (TargetEntry *te : tlist) outputs.push_back(Expr((Node *)te->expr, wc));
    }
    rel = MakeProject(rel, outputs);
  }

  if (q->distinctClause) {
    RelP d = NewRel(RelKind::Aggregate);
    d->cols = rel->cols;
    d->inputs = {rel};
    d->nkeys = static_cast<int>(rel->cols.size());
    d->distinct = true;
    rel = d;
  }
  if ((q->limitCount || q->limitOffset) && !IdentityOffset(q)) {
    RelP l = NewRel(RelKind::Limit);
    l->cols = rel->cols;
    l->inputs = {rel};
    auto bound = [&](Node *n) -> std::string {
      if (!n) return "";
      if (!IsA(n, Const)) n = PgCall([&] { return eval_const_expressions(nullptr, n); });
      if (IsA(n, Param) && castNode(Param, n)->paramkind == PARAM_EXTERN) return ProgramParam(castNode(Param, n));
      if (IsA(n, FuncExpr) && castNode(FuncExpr, n)->funcformat == COERCE_IMPLICIT_CAST &&
          list_length(castNode(FuncExpr, n)->args) == 1) {  // LIMIT $1 of an int4 parameter: int8($1)
        Node *a = (Node *)linitial(castNode(FuncExpr, n)->args);
        if (IsA(a, Param) && castNode(Param, a)->paramkind == PARAM_EXTERN)
          return "CAST(" + ProgramParam(castNode(Param, a)) + " AS " + TypeSql(exprType(n), exprTypmod(n)) + ")";
      }
      if (!IsA(n, Const)) Refuse("LIMIT or OFFSET that is not a constant or a parameter in the loss");
      auto *k = castNode(Const, n);
      return k->constisnull ? "" : ConstSql(k);
    };
    l->limit = bound(q->limitCount);
    l->offset = bound(q->limitOffset);
    foreach (lc, q->sortClause) {
      auto *sgc = lfirst_node(SortGroupClause, lc);
      l->order.push_back(TranslateSortKey(sgc, get_sortgroupclause_tle(sgc, q->targetList)->resno - 1));
    }
    rel = l;
  }
  // Drop junk columns (ORDER BY / GROUP BY helpers): they sit at the end.
  size_t visible = 0;
  for (TargetEntry *te : tlist)
    if (!te->resjunk) visible++;
  if (visible < rel->cols.size()) {
    std::vector<ExprP> keep;
    for (size_t i = 0; i < visible; i++) keep.push_back(MakeCol(static_cast<int>(i), 0, rel->cols[i]));
    rel = MakeProject(rel, keep);
  }
  return rel;
}

ExprP Translator::Sublink(SubLink *sl, const Ctx &c) {
  if (c.side != 0) Refuse("nested subquery inside a correlated subquery of the loss");
  auto *sq = castNode(Query, sl->subselect);
  CheckQuery(sq);
  auto e = std::make_shared<ddx::Expr>();
  e->kind = ExprKind::Sublink;
  e->type = kBool;
  e->sublink = sl->subLinkType == EXISTS_SUBLINK ? SublinkKind::Exists
               : sl->subLinkType == ANY_SUBLINK  ? SublinkKind::Any
                                                 : SublinkKind::All;
  Scope scope{sq, c.scope};
  std::vector<ExprP> params;
  bool simple = !sq->hasAggs && !sq->groupClause && !sq->havingQual && !sq->setOperations && !sq->limitCount &&
                !sq->limitOffset && !sq->distinctClause && !sq->hasSubLinks;
  if (simple) {
    ColMap smap;
    RelP srel = FromList(sq, sq->jointree->fromlist, nullptr, &scope, smap);
    Ctx sc;
    sc.map = &smap;
    sc.q = sq;
    sc.side = 1;
    sc.outer = &c;
    sc.scope = &scope;
    std::vector<ExprP> local, corr;
    List *conj = make_ands_implicit((::Expr *)sq->jointree->quals);
    ListCell *lc;
    foreach (lc, conj) {
      Node *qual = (Node *)lfirst(lc);
      bool correlated = PgCall([&] { return contain_vars_of_level(qual, 1); });
      if (correlated) {
        corr.push_back(Expr(qual, sc));
      } else {
        Ctx lcx;
        lcx.map = &smap;
        lcx.q = sq;
        lcx.scope = &scope;
        local.push_back(Expr(qual, lcx));
      }
    }
    if (!local.empty()) srel = MakeFilter(srel, AndAll(local));
    e->sub = srel;
    e->corr = AndAll(corr);
    foreach (lc, sq->targetList) {
      auto *te = lfirst_node(TargetEntry, lc);
      if (!te->resjunk) params.push_back(Expr((Node *)te->expr, sc));
    }
  } else {
    bool correlated = PgCall([&] { return contain_vars_of_level((Node *)sq, 1); });
    if (correlated)
      Refuse("correlated subquery with aggregation or set operations in the loss", "",
             "Join with a CTE that computes the subquery for every key.");
    e->sub = TranslateQuery(sq, c.scope);
    for (size_t i = 0; i < e->sub->cols.size(); i++) params.push_back(MakeCol(static_cast<int>(i), 1, e->sub->cols[i]));
  }
  if (sl->subLinkType != EXISTS_SUBLINK) {
    Ctx tc = c;
    tc.sublink_params = &params;
    e->test = Expr(sl->testexpr, tc);
  }
  return e;
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

ExprP Translator::Expr(Node *n, const Ctx &c) {
  if (!n) throw Error(sqlstate::kInternalError, "ddx internal error: null expression");
  if (c.group_exprs) {
    for (size_t i = 0; i < c.group_exprs->size(); i++)
      if (equal(n, (*c.group_exprs)[i])) return MakeCol(static_cast<int>(i), c.side, ExprTypeOf(n));
    if (IsA(n, Aggref)) {
      for (size_t i = 0; i < c.aggrefs->size(); i++)
        if (equal(n, (*c.aggrefs)[i])) return AggValue((*c.agg_outs)[i], c.side);
      throw Error(sqlstate::kInternalError, "ddx internal error: aggregate not collected");
    }
  }
  switch (nodeTag(n)) {
    case T_Var: {
      auto *v = castNode(Var, n);
      if (v->varlevelsup > 0) {
        if (!c.outer) Refuse("correlated subquery in the loss", "", "Rewrite it as a join.");
        Var *copy = (Var *)PgCall([&] { return copyObjectImpl(v); });
        copy->varlevelsup--;
        return Expr((Node *)copy, *c.outer);
      }
      if (c.group_exprs)
        Refuse("column used outside an aggregate without appearing in GROUP BY", "", "Add the column to GROUP BY.");
      if (v->varattno <= 0) Refuse("system column or whole-row reference in the loss");
      if (c.map) {
        auto it = c.map->find({static_cast<int>(v->varno), v->varattno});
        if (it != c.map->end()) return MakeCol(it->second, c.side, ExprTypeOf(n));
      }
      if (c.q && v->varno >= 1 && static_cast<int>(v->varno) <= list_length(c.q->rtable)) {
        RangeTblEntry *rte = rt_fetch(v->varno, c.q->rtable);
        if (rte->rtekind == RTE_JOIN && v->varattno <= list_length(rte->joinaliasvars))
          return Expr((Node *)list_nth(rte->joinaliasvars, v->varattno - 1), c);
      }
      throw Error(sqlstate::kInternalError, "ddx internal error: unresolved column reference");
    }
    case T_Const:
      return [&] {
        auto e = std::make_shared<ddx::Expr>();
        e->kind = ExprKind::Const;
        e->text = ConstSql(castNode(Const, n));
        e->type = ExprTypeOf(n);
        return e;
      }();
    case T_Param: {
      auto *p = castNode(Param, n);
      if (p->paramkind == PARAM_SUBLINK && c.sublink_params && p->paramid >= 1 &&
          p->paramid <= static_cast<int>(c.sublink_params->size()))
        return (*c.sublink_params)[p->paramid - 1];
      if (p->paramkind == PARAM_EXTERN) {  // a value held constant, bound when the program runs
        auto k = std::make_shared<ddx::Expr>();
        k->kind = ExprKind::Const;
        k->text = ProgramParam(p);
        k->type = ExprTypeOf(n);
        return MakeOpaque("$1", "parameter $" + std::to_string(p->paramid), {k}, k->type);
      }
      Refuse("parameter $" + std::to_string(p->paramid) + " in the loss");
    }
    case T_RelabelType: {
      auto *r = castNode(RelabelType, n);
      ExprP a = Expr((Node *)r->arg, c);
      Type t = ExprTypeOf(n);
      if (t.differentiable) return MakeCall("cast", {a}, t);
      return MakeOpaque("CAST($1 AS " + t.sql + ")", "CAST", {a}, t);
    }
    case T_CoerceViaIO: {
      auto *r = castNode(CoerceViaIO, n);
      Type t = ExprTypeOf(n);
      return MakeOpaque("CAST($1 AS " + t.sql + ")", "CAST", {Expr((Node *)r->arg, c)}, t);
    }
    case T_FuncExpr: {
      auto *f = castNode(FuncExpr, n);
      Type t = ExprTypeOf(n);
      bool stop = std::find(stop_oids_.begin(), stop_oids_.end(), f->funcid) != stop_oids_.end();
      FuncInfo fi = Func(f->funcid);
      if (!stop && fi.sql && !fi.retset)
        if (ExprP body =
                Inlined(f->funcid, f->funcresulttype, f->funccollid, f->inputcollid, f->args, f->funcvariadic, c))
          return body;
      std::vector<ExprP> args;
      ListCell *lc;
      foreach (lc, f->args) args.push_back(Expr((Node *)lfirst(lc), c));
      if (stop) return MakeCall("stop_gradient", args, t);
      if (f->funcvariadic) Refuse("VARIADIC call of " + fi.name + " in the loss");
      if (fi.retset && !(c.map == nullptr && c.group_exprs == nullptr))
        Refuse("set-returning function " + fi.name + " in an expression of the loss");
      const char *rule = RuleOf(fi.internal);
      if (*rule && t.differentiable) return MakeCall(rule, args, t);
      std::string shown = fi.builtin ? fi.name : fi.qualified;
      if (!fi.builtin) NoteOpaque(shown + "()");
      auto e = MakeOpaque(fi.qualified + "(" + Placeholders(args.size()) + ")", shown, args, t, fi.is_volatile);
      return e;
    }
    case T_OpExpr:
    case T_DistinctExpr:
    case T_NullIfExpr: {
      auto *o = (OpExpr *)n;
      PgCall([&] { set_opfuncid(o); });
      Type t = ExprTypeOf(n);
      FuncInfo fi = Func(o->opfuncid);
      if (IsA(n, OpExpr) && fi.sql)  // an operator of a user's, made of an SQL function
        if (ExprP body = Inlined(o->opfuncid, o->opresulttype, o->opcollid, o->inputcollid, o->args, false, c))
          return body;
      std::vector<ExprP> args;
      ListCell *lc;
      foreach (lc, o->args) args.push_back(Expr((Node *)lfirst(lc), c));
      if (IsA(n, DistinctExpr)) return MakeOpaque("($1 IS DISTINCT FROM $2)", "IS DISTINCT FROM", args, kBool);
      if (IsA(n, NullIfExpr)) return MakeOpaque("NULLIF($1, $2)", "NULLIF", args, t);
      if (!fi.builtin) NoteOpaque("operator " + OperatorSql(o->opno) + " (" + fi.qualified + "())");
      const char *rule = RuleOf(fi.internal);
      if (*rule && t.differentiable) return MakeCall(rule, args, t);
      std::string op = OperatorSql(o->opno);
      std::string tmpl = args.size() == 1 ? "(" + op + " $1)" : "($1 " + op + " $2)";
      auto e = MakeOpaque(tmpl, fi.name, args, t, fi.is_volatile);
      std::const_pointer_cast<ddx::Expr>(e)->strict = fi.strict;
      return e;
    }
    case T_ScalarArrayOpExpr: {
      auto *o = castNode(ScalarArrayOpExpr, n);
      std::vector<ExprP> args{Expr((Node *)linitial(o->args), c), Expr((Node *)lsecond(o->args), c)};
      std::string op = OperatorSql(o->opno);
      return MakeOpaque("($1 " + op + (o->useOr ? " ANY" : " ALL") + " ($2))", "ANY/ALL", args, kBool);
    }
    case T_BoolExpr: {
      auto *b = castNode(BoolExpr, n);
      std::vector<ExprP> args;
      ListCell *lc;
      foreach (lc, b->args) args.push_back(Expr((Node *)lfirst(lc), c));
      if (b->boolop == NOT_EXPR) return MakeOpaque("(NOT $1)", "NOT", args, kBool);
      std::string t = "(";
      for (size_t i = 0; i < args.size(); i++)
        t += (i ? (b->boolop == AND_EXPR ? " AND $" : " OR $") : "$") + std::to_string(i + 1);
      return MakeOpaque(t + ")", b->boolop == AND_EXPR ? "AND" : "OR", args, kBool);
    }
    case T_NullTest: {
      auto *t = castNode(NullTest, n);
      if (t->argisrow) Refuse("IS NULL on a row in the loss");
      return MakeOpaque(t->nulltesttype == IS_NULL ? "($1 IS NULL)" : "($1 IS NOT NULL)", "IS NULL",
                        {Expr((Node *)t->arg, c)}, kBool);
    }
    case T_BooleanTest: {
      auto *t = castNode(BooleanTest, n);
      static const char *kTests[] = {"IS TRUE",      "IS NOT TRUE", "IS FALSE",
                                     "IS NOT FALSE", "IS UNKNOWN",  "IS NOT UNKNOWN"};
      return MakeOpaque(std::string("($1 ") + kTests[t->booltesttype] + ")", "boolean test", {Expr((Node *)t->arg, c)},
                        kBool);
    }
    case T_CaseExpr: {
      auto *ce = castNode(CaseExpr, n);
      Ctx cc = c;
      if (ce->arg) cc.case_test = Expr((Node *)ce->arg, c);
      auto e = std::make_shared<ddx::Expr>();
      e->kind = ExprKind::Case;
      e->type = ExprTypeOf(n);
      ListCell *lc;
      foreach (lc, ce->args) {
        auto *w = lfirst_node(CaseWhen, lc);
        e->args.push_back(Expr((Node *)w->expr, cc));
        e->args.push_back(Expr((Node *)w->result, c));
      }
      if (ce->defresult) {
        e->args.push_back(Expr((Node *)ce->defresult, c));
      } else {
        auto nul = std::make_shared<ddx::Expr>();
        nul->kind = ExprKind::Const;
        nul->type = e->type;
        nul->text = "NULL::" + e->type.sql;
        e->args.push_back(nul);
      }
      return e;
    }
    case T_CaseTestExpr:
      if (!c.case_test) Refuse("this CASE form is not supported in the loss");
      return c.case_test;
    case T_CoalesceExpr: {
      auto *co = castNode(CoalesceExpr, n);
      auto e = std::make_shared<ddx::Expr>();
      e->kind = ExprKind::Case;
      e->type = ExprTypeOf(n);
      std::vector<ExprP> args;
      ListCell *lc;
      foreach (lc, co->args) args.push_back(Expr((Node *)lfirst(lc), c));
      for (size_t i = 0; i + 1 < args.size(); i++) {
        e->args.push_back(MakeOpaque("($1 IS NOT NULL)", "IS NOT NULL", {args[i]}, kBool));
        e->args.push_back(args[i]);
      }
      e->args.push_back(args.back());
      return e;
    }
    case T_MinMaxExpr: {
      auto *mm = castNode(MinMaxExpr, n);
      std::vector<ExprP> args;
      ListCell *lc;
      foreach (lc, mm->args) args.push_back(Expr((Node *)lfirst(lc), c));
      Type t = ExprTypeOf(n);
      const char *name = mm->op == IS_GREATEST ? "greatest" : "least";
      if (t.differentiable) return MakeCall(name, args, t);
      return MakeOpaque(std::string(mm->op == IS_GREATEST ? "GREATEST(" : "LEAST(") + Placeholders(args.size()) + ")",
                        name, args, t);
    }
    case T_SubLink: {
      auto *sl = castNode(SubLink, n);
      if (sl->subLinkType == EXPR_SUBLINK) {
        if (c.scalars) {
          auto it = c.scalars->find(sl);
          if (it != c.scalars->end()) return MakeCol(it->second, c.side, ExprTypeOf(n));
        }
        Refuse("scalar subquery in this position of the loss", "", "Move it to the target list or WHERE.");
      }
      if (sl->subLinkType == EXISTS_SUBLINK || sl->subLinkType == ANY_SUBLINK || sl->subLinkType == ALL_SUBLINK)
        return Sublink(sl, c);
      Refuse("this kind of subquery is not supported in the loss");
    }
    case T_ArrayExpr: {
      auto *a = castNode(ArrayExpr, n);
      if (a->multidims) Refuse("multidimensional ARRAY[] in the loss");
      std::vector<ExprP> args;
      ListCell *lc;
      foreach (lc, a->elements) args.push_back(Expr((Node *)lfirst(lc), c));
      Type t = ExprTypeOf(n);
      return MakeOpaque("CAST(ARRAY[" + Placeholders(args.size()) + "] AS " + t.sql + ")", "ARRAY", args, t);
    }
    case T_CollateExpr: {  // (also where PostgreSQL inlined a function of a collatable result)
      auto *ce = castNode(CollateExpr, n);
      std::string coll = Str(PgCall([&] {
        HeapTuple tp = SearchSysCache1(COLLOID, ObjectIdGetDatum(ce->collOid));
        if (!HeapTupleIsValid(tp)) elog(ERROR, "cache lookup failed for collation %u", ce->collOid);
        auto *cf = (Form_pg_collation)GETSTRUCT(tp);
        char *q = quote_qualified_identifier(get_namespace_name(cf->collnamespace), NameStr(cf->collname));
        ReleaseSysCache(tp);
        return q;
      }));
      return MakeOpaque("($1 COLLATE " + coll + ")", "COLLATE", {Expr((Node *)ce->arg, c)}, ExprTypeOf(n));
    }
    case T_Aggref:
      Refuse("aggregate in this position of the loss");
    case T_WindowFunc: {
      if (c.windows) {
        auto it = c.windows->find(castNode(WindowFunc, n));
        if (it != c.windows->end()) return MakeCol(it->second, c.side, ExprTypeOf(n));
      }
      Refuse("window function in this position of the loss");
    }
    default:
      Refuse(UnsupportedName(n) + " is not supported in the loss", "",
             "Compute it in a query of its own (a table or a CTE outside the loss), or rewrite it with "
             "operators, functions and CASE.");
  }
}

RelP VjpLoss(const RelP &out, const std::vector<std::string> &out_names, const RelP &cot,
             const std::vector<std::string> &cot_names) {
  const Type f8{"pg_catalog.float8", true};
  std::vector<bool> active = ActiveColumns(out);
  int nout = static_cast<int>(out->cols.size());
  std::vector<ExprP> keys, products;
  for (int i = 0; i < nout; i++) {
    auto j = std::find(cot_names.begin(), cot_names.end(), out_names[i]) - cot_names.begin();
    if (j == static_cast<long>(cot_names.size()))
      throw Error(sqlstate::kUndefinedColumn, "the cotangent relation has no column \"" + out_names[i] + "\"",
                  "The cotangent names the output's keys and has one column per output value, of the same name.");
    ExprP o = MakeCol(i, 0, out->cols[i]), c = MakeCol(nout + static_cast<int>(j), 0, cot->cols[j]);
    if (!active[i]) {
      keys.push_back(NullSafeEquals(o, c));
      continue;
    }
    if (!cot->cols[j].differentiable)
      throw Error(sqlstate::kDatatypeMismatch, "cotangent column \"" + cot_names[j] + "\" is not a number");
    products.push_back(MakeCall("mul", {o, MakeCall("cast", {c}, f8)}, f8));
  }
  if (products.empty()) {
    auto zero = std::make_shared<ddx::Expr>();
    zero->text = "0::float8";
    zero->type = f8;
    products.push_back(zero);
  }
  RelP agg = NewRel(RelKind::Aggregate);
  agg->inputs = {MakeProject(MakeJoin(out, cot, JoinKind::Inner, AndAll(keys)), products)};
  for (size_t k = 0; k < products.size(); k++) {
    agg->aggs.push_back(AggCall{"sum", static_cast<int>(k)});
    agg->cols.push_back(f8);
  }
  // Σ_k coalesce(sum_k, 0): a value column whose rows all miss a cotangent adds nothing
  ExprP total;
  for (size_t k = 0; k < products.size(); k++) {
    ExprP sk = MakeCol(static_cast<int>(k), 0, f8);
    auto zero = std::make_shared<ddx::Expr>();
    zero->text = "0::float8";
    zero->type = f8;
    auto term = std::make_shared<ddx::Expr>();
    term->kind = ExprKind::Case;
    term->type = f8;
    term->args = {MakeOpaque("($1 IS NOT NULL)", "IS NOT NULL", {sk}, kBool), sk, zero};
    total = total ? MakeCall("add", {total, term}, f8) : term;
  }
  return MakeProject(agg, {total});
}

}  // namespace ddx::pg
