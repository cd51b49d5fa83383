// Query -> IR: builds the relational IR of a loss from PostgreSQL's analyzed
// Query trees (phase "PostgreSQL in"). Views are expanded, CTEs resolved by
// name and level, functions and operators resolved by OID: a function counts
// as differentiable when it is a built-in of pg_catalog whose C symbol is in
// the rule map (translate/catalog.cpp), or an SQL function that PostgreSQL would
// inline (its body is translated in its place, by PostgreSQL's own inlining:
// scalar ones through eval_const_expressions, set-returning ones in FROM
// through inline_set_returning_function); everything else is emitted as an
// opaque, schema-qualified call that may not carry gradient, and the
// functions of users and extensions among them are recorded
// (OpaqueFunctions), since a parameter table read inside one is invisible.
//
// Catalog calls go through PgCall, so a PostgreSQL error arrives here as a
// ddx::Error; the caller reports it after the C++ frames are gone.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ddx/core/ir.h"
#include "ddx/core/program.h"
#include "ddx/pg/guard.h"

extern "C" {
#include "nodes/parsenodes.h"
}

namespace ddx::pg {

// A parameter column: grad(..., t.col) asks for ∂loss/∂col in every row of t.
struct ParamTarget {
  Oid relid = InvalidOid;
  std::string attname;
};

// A Query and the Query levels around it, for CTE references (ctelevelsup).
struct Scope {
  Query *query = nullptr;
  const Scope *parent = nullptr;
};

// The kind of Citus table relid is ("distributed table", "reference table",
// "table managed by Citus"), or "" (not one, or no Citus); *hash (if given)
// whether it is distributed by hash, *column (if given) its distribution
// column where it is (InvalidAttrNumber otherwise).
std::string CitusTableKind(Oid relid, bool *hash = nullptr, AttrNumber *column = nullptr);
// Throws 0A000 if relid is a Citus table (`role name`: what it is to the
// statement, for the message): forward mode does not run over Citus yet.
void RefuseCitusTable(Oid relid, const std::string &name, const std::string &role);
// Whether a parameter's table is a Citus table, whose rows grad identifies
// by primary key, and (*distributed, if given) whether it is one distributed
// by hash; throws 0A000 where ddx cannot take parameters from it yet (a
// range- or append-distributed or a partitioned table, a table without a
// primary key).
bool CitusParameterTable(Oid relid, const std::string &name, bool *distributed = nullptr);
// relid's primary-key columns, in attribute-number order (none: empty).
std::vector<AttrNumber> PrimaryKeyAttnos(Oid relid);

struct AggOut;  // (translate/internal.h)

class Translator {
 public:
  Translator(std::vector<ParamTarget> params, std::vector<Oid> stop_gradient_oids);

  // The relation of a SELECT: its non-junk target list, in order.
  RelP TranslateQuery(Query *q, const Scope *parent);
  // A CTE of `owner`'s WITH list (memoized: a CTE read twice is one relation).
  RelP TranslateCte(CommonTableExpr *cte, const Scope *owner);
  // A view, expanded (memoized by OID).
  RelP TranslateView(Oid relid);
  // A table (or a view), as a FROM item naming it reads it.
  RelP TranslateTable(Oid relid);
  // The statement parameters ($n: PREPARE, plpgsql variables, SQL-function
  // arguments) the translated relations read, in the order of the program's
  // own parameters: the program's $k is ExternParams()[k - 1].
  const std::vector<Param *> &ExternParams() const { return extern_params_; }
  // The functions and aggregates outside pg_catalog that the translated
  // relations call and ddx cannot see into (not inlined), as a user names
  // them, in order of first call: what a parameter table may be read through
  // without the loss reading it.
  const std::vector<std::string> &OpaqueFunctions() const { return opaque_; }

  struct Ctx;
  struct AggPlan;

 private:
  AggPlan PlanAggregate(Aggref *ar, const Ctx &c);
  RelP Aggregate(RelP rel, const std::vector<Node *> &groups, const std::vector<Node *> &aggrefs, const Ctx &c,
                 std::vector<AggOut> &outs);
  RelP Grouped(Query *q, RelP rel, const Ctx &c, const Scope *scope, const std::vector<SubLink *> &links,
               const std::vector<TargetEntry *> &tlist);
  RelP Limited(Query *q, RelP rel);
  ExprP WindowArg(WindowFunc *f, const Ctx &c);
  struct Rte;
  RelP FromList(Query *q, List *fromlist, Node *quals, const Scope *scope, std::map<std::pair<int, int>, int> &map);
  RelP JoinTreeItem(Query *q, Node *n, const Scope *scope, std::map<std::pair<int, int>, int> &map);
  RelP RangeTableEntry(Query *q, int rtindex, const Scope *scope, std::vector<int> &attno_to_col);
  RelP Unpivot(Query *q, int rtindex, RelP left, const Scope *scope, std::map<std::pair<int, int>, int> &map);
  RelP Table(RangeTblEntry *rte, std::vector<int> *attno_to_col);
  RelP SetOp(Query *q, Node *n, const Scope *scope);
  RelP JoinWindows(Query *q, RelP rel, const Ctx &c, std::map<const WindowFunc *, int> &out);
  RelP PartitionAggregates(RelP rel, std::vector<ExprP> pre, const std::vector<WindowFunc *> &mine,
                           const std::vector<std::string> &names, const Ctx &c, std::map<const WindowFunc *, int> &out);
  RelP WindowOver(Query *q, RelP rel, WindowClause *wc, const std::vector<ExprP> &pre,
                  const std::vector<WindowFunc *> &mine, const std::vector<std::string> &names, const Ctx &c,
                  std::map<const WindowFunc *, int> &out);
  RelP JoinScalars(RelP rel, const std::vector<SubLink *> &links, const Scope *scope,
                   std::map<const SubLink *, int> &out);
  ExprP Expr(Node *n, const Ctx &c);  // a dispatcher over the node families below (expr.cpp)
  ExprP VarOf(Var *v, const Ctx &c);
  ExprP Value(Node *n, const Ctx &c);
  ExprP Coerced(Node *n, const Ctx &c);
  ExprP FuncCall(FuncExpr *f, const Ctx &c);
  ExprP Operator(Node *n, const Ctx &c);
  ExprP Predicate(Node *n, const Ctx &c);
  ExprP Conditional(Node *n, const Ctx &c);
  ExprP Computed(Node *n, const Ctx &c);
  std::vector<ExprP> Exprs(List *l, const Ctx &c);
  std::string ProgramParam(Param *p);
  ExprP Sublink(SubLink *sl, const Ctx &c);

  std::vector<ParamTarget> params_;
  std::vector<Oid> stop_oids_;
  std::map<const CommonTableExpr *, RelP> ctes_;
  std::map<Oid, RelP> views_;
  std::map<const SubLink *, RelP> scalars_;
  std::vector<Param *> extern_params_;
  std::vector<std::string> opaque_;
  std::vector<Oid> inlining_;  // SQL functions whose bodies are being translated (a recursive one is not again)
  void NoteOpaque(const std::string &name);
  ExprP Inlined(Oid funcid, Oid rettype, Oid retcoll, Oid inputcoll, List *args, bool variadic, const Ctx &c);
};

// The loss of vjp(out, cot, ...): Σ over the rows of out ⋈ cot (on the
// output's keys, its columns that do not depend on a parameter, NULL matching
// NULL) of Σ over value columns of out.v · cot.v. Throws Error.
RelP VjpLoss(const RelP &out, const std::vector<std::string> &out_names, const RelP &cot,
             const std::vector<std::string> &cot_names);

}  // namespace ddx::pg
