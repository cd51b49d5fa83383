// The contraction node's private header: what its files share (one idea a
// file: shape, path, plan, key_table, groups, build, exec, explain, install).
//
// The contraction node: a CustomScan that computes
//
//   SELECT <keys of a>, <keys of b>, SUM(f(a) * g(b)) [, SUM(...) ...]
//   FROM a JOIN b ON a.k1 = b.k1 [AND ...] GROUP BY <keys of a>, <keys of b>
//
// without forming the join's rows: it hashes one side by its join key (each
// row with its group key, interned to a dense id, and its factors), streams
// the other, and adds each product straight into the accumulator of its pair
// of group ids. A matmul's join has one row per (i, k, j); here the per-pair
// work is one multiplication and one addition.
//
// Where: create_upper_paths_hook at UPPERREL_GROUP_AGG, which sees the join
// and the GROUP BY together (planner.c, create_ordinary_grouping_paths, calls
// it after the core's Agg paths are in grouped_rel). The input must be a join
// of two sides (tables, subqueries, CTE scans, or joins of them: their
// cheapest paths become the node's children; JoinSplits), inner, by hashable strict
// equalities and by other conditions that read the GROUP BY keys alone
// (attention's causal k.t <= q.t: tested once per group, when its first pair
// of rows joins, and a group where it fails is dropped); every aggregate
// of the target a plain SUM(float8) of a product float8mul(f, g) (or
// float48mul, float84mul), or SUM(float4) of float4mul(f, g), with f over
// one side's columns and g over the other's (or f a NULL guard of g's side
// around a value of the other side, as ddx's backward writes it:
// SplitGuard), AVG of such a product, or
// COUNT(*) or COUNT(e) of one side's expression (NodeAggregate); every
// other target entry a GROUP BY key over one side's columns, a column that
// depends on a primary key grouped by (one more key: GroupKeys), or a stable
// expression of the keys and aggregates; no HAVING, grouping sets, volatile
// functions, sublinks or PARAM_EXEC; a side whose keys or factors may raise
// an error is not the hashed one where the other's cannot (MayRaise), and
// where both sides' factors may, the hashed side's are computed on each
// row's first pair (LazyFactors). Any other query keeps PostgreSQL's own plan. The GUC
// ddx.contraction decides where it is considered: off, programs (ddx's
// gradient programs and jvp queries; the default) or all.
//
// Exactly PostgreSQL's answer: sum(float8) is float8pl over the non-NULL
// products in some order (only the order of additions may differ); a NULL
// factor contributes nothing; a group whose products are all NULL is NULL; a
// group exists where at least one pair of rows joins; float8_mul and
// float8_pl (utils/float.h) raise overflow and underflow as PostgreSQL does.
// sum(float4) adds in float4 (float4pl, its transition function), so the
// node rounds each product and each partial sum to float4 (float4_mul,
// float4_pl) as PostgreSQL does; only the order of additions differs.
// avg keeps float8_accum's N, Sx and Sxx (three accumulators) and returns
// Sx / N, so that it raises where float8_accum does; count counts pairs.
//
// Memory: the node's context is held to get_hash_memory_limit() (work_mem ×
// hash_mem_multiplier). Past it, before any row is returned, the node frees
// its state and runs its third child instead: PostgreSQL's own hash
// aggregate over the join, planned beside it (create_agg_path, never added
// to the rel: add_path frees the paths it rejects). Long loops check for
// interrupts. Parallel query: the node is never partial; it is parallel-safe
// where its children are (then it may run in a worker over whole inputs).
//
// Expressions: each side's keys and factors are kept in custom_private with
// their Vars turned into OUTER_VAR references to that child's output columns
// (found by varno and varattno in the child's finished target list), and
// evaluated with the child's tuple as the outer tuple. setrefs does not touch
// custom_private, which is why no expression may need it (PARAM_EXEC,
// SubPlans); $n parameters are read from the execution's parameter list, so
// generic plans stay right.
//
// The node's files are C-style C++: no object with a destructor lives in a
// frame that a PostgreSQL error can longjmp over.
#pragma once
#include "ddx/pg/contraction_node.h"

extern "C" {
#include "postgres.h"

#include "commands/explain.h"
#include "nodes/extensible.h"
#include "nodes/pathnodes.h"
#include "optimizer/planner.h"
}

// Shared by the node's files only: hidden, so that calls bind inside ddx.so
// (as the anonymous namespace of the one file they came from had them).
#pragma GCC visibility push(hidden)

namespace ddx::pg::contraction {

// ddx.contraction, ddx.in_program and the hooks they chain (install.cpp).
enum ContractionMode { kOff, kPrograms, kAll };
extern int mode;
extern bool in_program;  // ddx.in_program: set by the runner's ProgramSettings
extern create_upper_paths_hook_type prev_upper_hook;

// --- the plan ------------------------------------------------------------------

// The two sides of the node. While the shape checks run they are the
// split's two relations (path.cpp), in its order; OrientSides then puts the
// build side (hashed, read first) at 0 and the probe side (streamed) at 1.
constexpr int kBuild = 0;
constexpr int kProbe = 1;

// The aggregate forms the node computes (NodeAggregate), each with one row
// in the table of accumulator kinds.
enum class AccKind : uint8 {
  kSum,        // sum(float8) of f * g (float8mul, float48mul, float84mul), or of one side's expression
  kSumFloat4,  // sum(float4) of float4mul(f, g): each product and partial sum rounded to float4
  kAvg,        // avg(float8) of f * g: float8_accum's N, Sx and Sxx
  kAvgFloat4,  // avg(float4) of float4mul(f, g): float4_accum's, of the float4 products
  kCount,      // count(*), count(e): the pairs where e is not NULL, as products of 1s
  kSumSelect,  // sum(float8) of a value guarded by the other side (SelectGuard)
  kAvgSelect,  // avg(float8) of such a value
};

// How one output aggregate adds its pairs.
struct AccSpec {
  AccKind kind;
  bool null_zero;     // of COALESCE(term, 0): a pair whose term is NULL adds 0
  int override_side;  // kSumSelect, kAvgSelect: the side of the override factor; else -1
};

// What the node computes: made by the planner hook (shape.cpp, path.cpp),
// carried by the path (ContractionPath), written into custom_private by
// ToPrivate and read back by FromPrivate (private.cpp, the only code that
// touches custom_private). Expressions are over the query's Vars in the
// path; in the plan, each side's are over its child's output (OUTER_VAR)
// and key_quals over the scan tuple's keys (INDEX_VAR): PlanContraction.
struct ContractionPlan {
  // The join's equalities, one entry per clause.
  List *join_keys[2] = {NIL, NIL};  // each side's operand
  List *join_hash[2] = {NIL, NIL};  // each side's hash function (oid)
  List *join_eq = NIL;              // the equality function (oid)
  List *join_coll = NIL;            // its collation (oid)
  List *probe_first = NIL;          // int: 1 where the clause's left operand is side 1's
  // The group keys, in the scan tuple's order.
  List *group_keys = NIL;
  List *group_side = NIL;  // int: each key's side
  List *group_eq = NIL, *group_hash = NIL, *group_coll = NIL;
  // The output aggregates, in the scan tuple's order (after the keys).
  List *factors[2] = {NIL, NIL};  // each side's factor of each (float8 or float4)
  List *accs = NIL;               // AccSpec *: how each adds its pairs
  // The join's other conditions: over the group keys alone (KeyQuals).
  List *key_quals = NIL;
  // row_number() OVER () of the groups, the scan tuple's last column
  // (NumberGroups).
  bool numbered = false;
  // The build side's factors may raise: computed on a build row's first
  // pair, not at the build (LazyFactors).
  bool lazy_factors = false;
  // Planning only: not in custom_private.
  Relids rels[2] = {nullptr, nullptr};  // each side's relations
  List *key_qual_ris = NIL;             // key_quals' RestrictInfos (their selectivity)
  List *aggrefs = NIL;                  // the Aggrefs, in the order of accs
};

// The node's path: a CustomPath carrying the plan it stands for.
struct ContractionPath {
  CustomPath path;
  ContractionPlan plan;
};

// custom_private of the plan p, a list of copies; and back (private.cpp).
List *ToPrivate(const ContractionPlan *p);
void FromPrivate(List *priv, ContractionPlan *p);

// --- planning ------------------------------------------------------------------

// Why a query keeps PostgreSQL's plan: the value a check returns where it
// decides, for its caller to log, show or pass on (as Citus's deferred
// errors). A refusal is true; kFits, the check passed, is false.
struct Refusal {
  const char *why;  // a string literal, or nullptr: no refusal
  explicit operator bool() const { return why != nullptr; }
};
constexpr Refusal kFits{nullptr};

// Whether evaluating n might raise an error (not leakproof).
bool MayRaise(Node *n);

// The plan of the query over the split into `sides` joined by `clauses`,
// into *p in the split's order: its join keys, group keys, other join
// conditions and the aggregates of `target`; or why the node cannot compute
// it (shape.cpp: the checks that decide).
Refusal ShapeOf(PlannerInfo *root, List *clauses, const Relids sides[2], PathTarget *target, ContractionPlan *p);

// path.cpp: the planner hook, and the window functions NumberGroups takes in.
// Whether n is computed from the node's scan tuple alone: its group keys,
// its sums, and row_number() OVER () of the window `winref`.
struct NumberCtx {
  List *gexprs, *aggrefs, *wfuncs;
  Index winref;
};
bool WindowFuncs(Node *n, NumberCtx *ctx);
void ContractionUpperPaths(PlannerInfo *root, UpperRelationKind stage, RelOptInfo *input_rel, RelOptInfo *output_rel,
                           void *extra);

// plan.cpp: the plan of the node's path.
Plan *PlanContraction(PlannerInfo *root, RelOptInfo *rel, CustomPath *best, List *tlist, List *clauses,
                      List *custom_plans);

// explain.cpp: the refusals of a grouping of a join of `query`, kept where
// it is the statement being explained (n reasons, distinct, in order); and
// the ExplainOneQuery_hook that explains a statement, then shows them under
// ddx.contraction = all.
void KeepRefusals(const Query *query, const char *const *why, int n);
void ExplainWithRefusals(Query *query, int cursorOptions, IntoClause *into, ExplainState *es, const char *queryString,
                         ParamListInfo params, QueryEnvironment *queryEnv);
extern ExplainOneQuery_hook_type prev_explain_hook;

// exec.cpp and explain.cpp: the executor's callbacks.
Node *CreateState(CustomScan *cs);
void Begin(CustomScanState *node, EState *estate, int eflags);
TupleTableSlot *Exec(CustomScanState *node);
void End(CustomScanState *node);
void ReScan(CustomScanState *node);
void Explain(CustomScanState *node, List *ancestors, ExplainState *es);

}  // namespace ddx::pg::contraction

#pragma GCC visibility pop
