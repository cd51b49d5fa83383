// What all the contraction node's files share (README.md: what the node
// computes, where it runs, why its answer is PostgreSQL's, its memory and
// fallback, and which file holds what): the settings, the method tables,
// the plan (ContractionPlan, one AccSpec per aggregate) with the functions
// that put it in custom_private and take it out, and the EXPLAIN and
// executor entry points.
//
// The node's files are C-style C++: no object with a destructor lives in a
// frame that a PostgreSQL error can longjmp over.
//
// No optimizer header here: the executor's files include this one, and
// what only the planner's use is in planning.h.
#pragma once

extern "C" {
#include "postgres.h"

#include "commands/explain.h"
#include "nodes/extensible.h"
#include "nodes/parsenodes.h"
}

// Shared by the node's files only: hidden, so that calls bind inside ddx.so
// (as the anonymous namespace of the one file they came from had them).
#pragma GCC visibility push(hidden)

namespace ddx::pg::contraction {

// ddx.contraction and ddx.in_program (install.cpp).
enum ContractionMode { kOff, kPrograms, kAll };
extern int mode;
extern bool in_program;  // ddx.in_program: set by the runner's ProgramSettings

// The node's method tables (install.cpp).
extern const CustomPathMethods kPathMethods;
extern const CustomScanMethods kScanMethods;
extern const CustomExecMethods kExecMethods;

// --- the plan ------------------------------------------------------------------

// The two sides of the node. While the shape checks run they are the
// split's two relations (path.cpp), in its order; OrientSides then puts the
// build side (hashed, read first) at 0 and the probe side (streamed) at 1.
constexpr int kBuild = 0;
constexpr int kProbe = 1;

// The aggregate forms the node computes (NodeAggregate), each with one row
// in the table of accumulator kinds (groups.h: AccOps).
enum class AccKind : uint8 {
  kSum,        // sum(float8) of f * g (float8mul, float48mul, float84mul), or of one side's expression
  kSumFloat4,  // sum(float4) of float4mul(f, g): each product and partial sum rounded to float4
  kAvg,        // avg(float8) of f * g: float8_accum's N, Sx and Sxx
  kAvgFloat4,  // avg(float4) of float4mul(f, g): float4_accum's, of the float4 products
  kCount,      // count(*), count(e): the pairs where e is not NULL, as products of 1s
  kSumSelect,  // sum(float8) of a value guarded by the other side (SelectGuard)
  kAvgSelect,  // avg(float8) of such a value
  kMax,        // max(float8) of f * g (float8mul), or of one side's expression: float8larger's
  kMin,        // min(float8) of the same: float8smaller's
  // The same four of a term that is not a product of one factor per side
  // (a softmax's normalizer sum(exp(s.x - m.m))): evaluated for each pair
  // over both rows (ContractionPlan::pair_terms).
  kSumPair,
  kAvgPair,
  kMaxPair,
  kMinPair,
};

// How one output aggregate adds its pairs.
struct AccSpec {
  AccKind kind;
  bool null_zero;     // of COALESCE(term, 0): a pair whose term is NULL adds 0
  int override_side;  // kSumSelect, kAvgSelect: the side of the override factor; else -1
};

// What the node computes: made by the planner hook (shape.cpp, path.cpp),
// carried by the path (ContractionPath, planning.h), written into
// custom_private by ToPrivate and read back by FromPrivate (private.cpp, the
// only code that touches custom_private). Expressions are over the query's
// Vars in the path; in the plan, each side's are over its child's output
// (OUTER_VAR) and key_quals over the scan tuple's keys (INDEX_VAR):
// PlanContraction.
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
  // Per output aggregate, its term over both sides where it is a pair
  // term (AccKind k*Pair; its factors are 1s), else NULL: in the plan, the
  // build side's columns as INNER_VAR, the probe side's as OUTER_VAR.
  List *pair_terms = NIL;
  // The join's other conditions: over the group keys alone (KeyQuals).
  List *key_quals = NIL;
  // row_number() OVER () of the groups, the scan tuple's last column
  // (NumberGroups).
  bool numbered = false;
  // The build side's factors may raise: computed on a build row's first
  // pair, not at the build (LazyFactors).
  bool lazy_factors = false;
  // GROUP BY GROUPING SETS of one relation (ConsiderOne): per set, an int
  // list of the places in group_keys of its keys; NIL for a plain GROUP BY.
  // Each input row goes into one group of every set; a set's rows have NULL
  // for the keys it does not group by.
  List *sets = NIL;
  // The GROUPING() calls of the output, the scan tuple's columns after the
  // aggregates: per call, an int list of its value in each set (its
  // arguments' bits, 1 where the set does not group by the argument).
  List *grouping_values = NIL;
  // Planning only: not in custom_private.
  Relids rels[2] = {nullptr, nullptr};  // each side's relations
  List *key_qual_ris = NIL;             // key_quals' RestrictInfos (their selectivity)
  List *aggrefs = NIL;                  // the Aggrefs, in the order of accs
  bool grouping_sets = false;           // GROUPING() calls are outputs (ShapeOf)
  List *grouping_funcs = NIL;           // the GroupingFuncs, in the order of grouping_values
};

// custom_private of the plan p, a list of copies; and back (private.cpp).
List *ToPrivate(const ContractionPlan *p);
void FromPrivate(List *priv, ContractionPlan *p);

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
