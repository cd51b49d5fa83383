// The translator's parts (see README.md in this folder): what its files
// share. Internal to src/pg/translate.
#pragma once

#include "ddx/pg/translate.h"

#include <algorithm>
#include <cstring>

#include "ddx/core/agg_rules.h"
#include "ddx/core/ir_build.h"

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

// A function's body being translated, for as long as this lives: on the
// translator's stack of them (a recursive function is inlined once).
struct Inlining {
  std::vector<Oid> &stack;
  Inlining(std::vector<Oid> &s, Oid f) : stack(s) { stack.push_back(f); }
  ~Inlining() { stack.pop_back(); }
  Inlining(const Inlining &) = delete;
  Inlining &operator=(const Inlining &) = delete;
};

[[noreturn]] inline void Refuse(const std::string &what, const std::string &detail = "", const std::string &hint = "") {
  throw Error(sqlstate::kFeatureNotSupported, what, detail, hint);
}

// catalog.cpp: each one PostgreSQL call behind PgCall
std::string TypeSql(Oid typid, int32 typmod);
Type MakeType(Oid typid, int32 typmod);
Type ExprTypeOf(Node *n);
std::string Qualified(Oid nsp, const char *name);
FuncInfo Func(Oid funcid);
const char *RuleOf(const std::string &internal);
std::string ConstSql(Const *c);
std::string OperatorSql(Oid opno);
int RelNatts(Oid relid);
bool InSameInheritanceTree(Oid a, Oid b);

// inline.cpp: SQL functions as PostgreSQL inlines them
Node *InlinedBody(Oid funcid, Oid rettype, Oid retcoll, Oid inputcoll, List *args, bool variadic);
Query *InlinedSetReturning(RangeTblEntry *rte);

// builders.cpp: what a Query level holds (the IR builders: ddx/core/ir_build.h)
std::string Placeholders(size_t n);
bool CollectScalarSublinks(Node *n, std::vector<SubLink *> *out);
bool CollectAggrefs(Node *n, std::vector<Node *> *out);
ExprP AndAll(const std::vector<ExprP> &v);
bool CollectWindowFuncs(Node *n, std::vector<WindowFunc *> *out);
void CheckQuery(Query *q);

// citus_tables.cpp: relid's unique indexes' column sets (attribute numbers)
std::vector<std::vector<AttrNumber>> UniqueIndexAttnos(Oid relid);

// aggregates.cpp
ExprP Filtered(const ExprP &cond, const ExprP &arg);
ExprP AggValue(const AggOut &o, int side);

// windows.cpp
bool IsAggregateName(const std::string &n);
bool IdentityOffset(const Query *q);
std::string OffsetSql(Node *n);
SortKey TranslateSortKey(SortGroupClause *sgc, int col);

}  // namespace ddx::pg
