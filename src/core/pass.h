// The program builder's shared state and vocabulary (internal to src/core).
//
// program.cpp (see its opening comment for what is saved and what is
// recomputed) drives a Pass over the loss's relation graph:
//
//   analysis  graph.cpp     the relations in topological order, their ids,
//                           which are materialized (CTEs), which scans are
//                           read in place; facts.cpp: ranks, columns that
//                           cannot be NULL, columns that carry gradient;
//                           region.cpp: each materialized row-local
//                           relation's region, decided before any SQL is
//                           printed.
//   forward   OpRule.forward, one per operator (ops/*.cpp), in order.
//   backward  the seed, then in reverse order each relation's cotangent
//             (accumulate.cpp) and its OpRule.reverse.
//
// An operator's rules are found through RuleOf (ops/registry.cpp), as JAX's
// ad.py finds a primitive's jvp and transpose: adding an operator is one
// file and one row. What rules share lives in the files named below; no
// rule leaves state for another except through the Pass's documented
// fields (contribs: the contributions a relation's cotangent sums; carried,
// bcols: what its cotangent step holds), and every step a rule emits goes
// into the Steps it is handed. Whatever SQL a rule builds that reads a
// backward step by name says so (Refs), where it is built.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ddx/core/agg_rules.h"
#include "ddx/core/ir.h"
#include "ddx/core/ir_build.h"
#include "ddx/core/program.h"
#include "ddx/core/pure.h"

namespace ddx::core {

// --- names and text (expr_util.cpp) -----------------------------------------

inline std::string C(int i) { return "c" + std::to_string(i); }  // a relation's column j
inline std::string D(int i) { return "d" + std::to_string(i); }  // a cotangent's column j
std::string Quote(const std::string &s);                         // an SQL string literal
std::string Join(const std::vector<std::string> &v, const std::string &sep);
[[noreturn]] void Internal(const std::string &what);

// Side of a column of leaf k in a region's expressions (0 and 1 are taken:
// the relation under evaluation and a sublink's relation).
constexpr int kLeafSide = 2;

using Resolver = std::function<std::string(int side, int col)>;
using ActiveFn = std::function<bool(int side, int col)>;
using Terms = std::map<std::pair<int, int>, std::vector<std::string>>;  // (side, col) -> adjoint terms

// --- expressions (expr_util.cpp) ---------------------------------------------

bool IsBoolType(const Type &t);
bool ContainsVolatile(const ExprP &e);
size_t ExprSize(const ExprP &e);
ExprP Substitute(const ExprP &e, const std::vector<ExprP> &cols);  // side-0 column j -> cols[j]
void CollectCols(const ExprP &e, std::set<std::pair<int, int>> &out);
std::set<int> LeafSides(const ExprP &e);
bool HasSublink(const ExprP &e);
bool ReadsColumns(const ExprP &e);
bool Costly(const ExprP &e);
bool Movable(const ExprP &e, const std::set<int> &sides);
std::vector<std::pair<ExprP, ExprP>> Equalities(const std::vector<ExprP> &conds);
std::vector<ExprP> Conjuncts(const std::vector<ExprP> &conds);
bool IdentityEq(const Type &t);
bool StrictIn(const ExprP &e, std::set<std::pair<int, int>> &cols);
bool MinAble(const ExprP &e);
bool Deferrable(const ExprP &e, size_t i);
void CheckVolatile(const ExprP &e);
bool IsActive(const ExprP &e, const ActiveFn &act);
bool IsActiveAny(const ExprP &e, const ActiveFn &act);
std::string F8(const std::string &sql, const Type &t);

// --- keys and frames (keys_sql.cpp, frame_sql.cpp) ---------------------------

std::string NullStandIn(const std::string &type);
std::string NullSafeKey(const std::string &x, const std::string &type);
std::string NullSafeEq(const std::string &a, const std::string &b, const std::string &type);
std::string FrameSql(const Frame &f);
Frame Transpose(const Frame &f);
bool HasOffset(const Frame &f);
bool IsRank(const std::string &fn);
bool OrderSensitive(const Rel *w);
std::string WindowSpec(const Rel *w, const std::string &prefix, const std::string &by = "");
std::string InFrame(const Rel *w);

// --- regions (region.cpp) ----------------------------------------------------

// A region's FROM list as decided: a leaf, or an inner or LEFT join of two
// with its ON conditions (rendered by Pass::FromWhere).
struct FromNode {
  int leaf = -1;  // leaf k, or -1: a join
  bool left = false;
  std::shared_ptr<const FromNode> lhs, rhs;
  std::vector<ExprP> on;  // over leaf space; none: ON true
};

// A row-local relation compiled over its materialized leaves.
struct Item {
  std::shared_ptr<const FromNode> from;  // the joins of the leaves
  std::vector<ExprP> pending;            // conditions for the nearest eligible ON, else WHERE
  std::vector<ExprP> cols;               // output columns over leaf space
  int first_leaf = 0, nleaves = 0;       // leaves [first_leaf, first_leaf + nleaves)
};

struct Region {
  std::vector<const Rel *> leaves;
  Item item;
  std::vector<ExprP> conds;  // join and filter conditions, over leaf space
  bool outer = false;        // a LEFT join: conds are not all of the region's conditions
  std::string Alias(int k) const { return "a" + std::to_string(k); }
};

bool RowLocal(const Rel *r);
ExprP LeafRid(int k);
std::set<int> Sides(const Region &reg);
std::set<int> Roots(const Region &reg, const std::set<int> &sides);
std::set<int> OnceLeaves(const Region &reg, const std::set<int> &of);
std::vector<std::vector<int>> UniqueKeys(const Rel *leaf);
int SoleRoot(const std::set<int> &roots, const std::set<int> &to);
int OnlyRootSide(const Region &reg, const std::set<int> &to);
std::set<int> BelowSides(const Region &reg, const std::vector<ExprP> &exprs);
std::string FlatName(const Region &reg, int side, int col);
std::string SavedCol(int side, int col);

// --- backward pieces (backprop.cpp, accumulate.cpp) --------------------------

// A factor whose chain rule is applied after summing: in a product x · y
// over a region whose leaves x and y read are disjoint, x's adjoint adj · y
// is first summed by the rids of x's leaves (one row per distinct x), and x
// is differentiated at that grain. Attention's p · v: the chain through
// p = exp(s - m) / z runs over the (i, j) pairs, not the (i, j, c) rows.
struct Deferred {
  ExprP expr;
  std::string adj;
  std::set<int> leaves;  // sides
};

// The backward steps that a piece of SQL reads by name (in a FROM or JOIN
// list: backward steps are read nowhere else), one name per reference: a
// step read twice is named twice. Recorded by the code that writes the
// reference, beside the SQL it is part of, so that program.cpp decides
// which steps are stored by counting references (Stream), never by
// searching the printed program for a name.
using Refs = std::vector<std::string>;

struct Contrib {
  std::string sql;
  Refs reads;  // the backward steps sql reads
  std::set<int> cols;
  bool carries = false;  // its rows also have the relation's saved columns (Carries, SavedRowCols)
  bool keyed = false;    // its rows also have the rid's keys rk<i> (see RidKeys)
  // A contraction transpose's: sql is head + "(" + pre + ") t " + tail, pre
  // the sums grouped by the columns `by` (empty: not one). Transposes of one
  // relation with the same head and tail are summed before the one join
  // (MakeCotangent).
  std::string head, pre, tail;
  std::vector<std::string> by;
};

std::string SumTerms(const std::vector<std::string> &terms);
bool Carries(const Rel *r);

// A step of the program: the CTE `name AS MATERIALIZED (sql)`, or AS NOT
// MATERIALIZED where it is not stored (program.cpp decides which, and
// prints the steps once every one is built).
struct Step {
  std::string name;
  std::string sql;
  Refs reads;  // the backward steps sql reads (a forward step reads none)
  bool stored = true;
};

// What a rule appends to: the program's steps (CTEs, in order) and the
// SELECTs of its gradient rows (toid, tid, pidx, g), with the backward
// steps those read (final_reads).
struct Steps {
  std::vector<Step> &ctes;
  std::vector<std::string> &finals;
  Refs &final_reads;
};

class Lets;

// --- the pass ----------------------------------------------------------------

struct Pass;
// Whether aggregate r's rid is a function of its group keys (ops/aggregate.cpp).
bool RidOfKeys(const Pass &p, const Rel &r);
// The group keys (columns c<j>) that go with relation r's rid wherever its
// rows are matched on it, or none: in place on Citus, a recomputed
// aggregate whose rid packs two keys (ops/aggregate.cpp). Citus sees a join
// on a packed rid as a join on an expression, and a GROUP BY of it as a
// grouping by something other than the distribution column, and plans both
// on the coordinator; with the keys beside it, matched and grouped too
// (they are functions of the rid: nothing changes but the plan), the
// distribution column is among them and the step stays on the workers.
std::vector<int> RidKeys(const Pass &p, const Rel *r);
// An aggregate's group keys c<k> as its cotangent b has them (select-list
// entries over alias b), or none where it lacks one, or where a backward
// rule reads more of a group than its keys and cotangent (a min/max's value,
// an average's count): its rid where that is its one key, the rid's keys
// where they go with it (RidKeys), nothing where there are no keys.
// Groups then reads the cotangent alone (see there).
std::vector<std::string> KeysInCotangent(const Pass &p, const Rel *r);
// The SQL of those keys' values for leaf k of a region's rows, or none
// where the rows do not have them (its contributions then match on rid
// alone: right, but planned by Citus on the coordinator).
using LeafKeys = std::function<std::vector<std::string>(int k)>;

struct Pass {
  // The analysis (graph.cpp). With tangents, for forward mode (jvp): their
  // relations are part of the graph, every scan with a parameter is saved
  // with its tangents, and no maximum is held constant.
  explicit Pass(const RelP &loss, const std::vector<Tangent> *tangents = nullptr, bool citus_in_place = false,
                bool contraction_node = true);
  const std::vector<Tangent> *tangents = nullptr;
  // CitusPlacement::InPlace (program.h): Citus tables without parameters
  // read in place, no fences, no EXISTS pre-filters.
  bool citus_in_place = false;
  // Whether the executor has the contraction node (program.h): a side of a
  // contraction that computes a costly value is then saved (graph.cpp).
  bool contraction_node = true;
  // " OFFSET 0": a subquery PostgreSQL plans on its own, never pulled up
  // into its reader (its values computed once per row); "" in place on Citus.
  std::string Fence() const { return citus_in_place ? "" : " OFFSET 0"; }
  // Where SQL is printed to be translated back to IR (hvp's tangent query,
  // TangentUse::Differentiate): the schema-qualified function that
  // stop_gradient(x) is printed as, so that what is held constant stays so
  // when the text is differentiated again. Empty: printed as x itself.
  std::string stop_gradient_sql;

  // graph (graph.cpp)
  RelP loss;
  std::vector<Rel *> order;  // topological, inputs first
  std::map<const Rel *, int> id;
  int next_id = 1;
  std::set<const Rel *> sublink_rels;
  std::set<const Rel *> mat;     // CTEs f<id>
  std::set<const Rel *> direct;  // scans read in place (rid = ctid)
  // In place on Citus: the forward steps of per-sample rows, NOT
  // MATERIALIZED, recomputed by each reader on the workers (graph.cpp).
  std::set<const Rel *> recomputed;
  // facts (facts.cpp)
  std::map<const Rel *, std::vector<bool>> active;
  std::set<std::pair<const Rel *, int>> held;  // max/min columns whose gradient is zero (shift.h)
  std::map<const Rel *, std::vector<bool>> notnull;
  // regions of the materialized row-local relations, windows and aggregates
  std::map<const Rel *, Region> regions;
  // backward (accumulate.cpp)
  std::map<const Rel *, std::vector<Contrib>> contribs;
  std::set<const Rel *> carried;               // cotangents with their saved columns (Carries)
  std::set<const Rel *> keyed;                 // cotangents with their rid's keys rk<i> (RidKeys)
  std::map<const Rel *, std::set<int>> bcols;  // the columns each cotangent b<id> has

  std::string F(const Rel *r) const { return "f" + std::to_string(id.at(r)); }
  std::string B(const Rel *r) const { return "b" + std::to_string(id.at(r)); }

  // SQL of an expression (expr_sql.cpp; a sublink's: ops/sublink.cpp)
  std::string Sql(const ExprP &e, const Resolver &res) const;
  // Forward mode (tangent.cpp): the tangent of e over region reg (its
  // leaves' tangent columns t<j>), as float8 SQL; a column's tangent.
  std::string TangentSql(const Region &reg, const ExprP &e) const;
  std::string LeafTangent(const Region &reg, int side, int col) const;

  // regions (region.cpp)
  Region Compile(const Rel *r, bool through) const;
  std::string LeafFrom(const Rel *r, const std::string &alias) const;
  std::string LeafCol(const Region &reg, int side, int col) const;
  Resolver Inside(const Region &reg) const;  // LeafCol over reg
  std::string Where(const Region &reg, const std::vector<ExprP> &pending) const;
  // The region's FROM ... WHERE ... (without FROM), rendered from its IR.
  std::string FromWhere(const Region &reg) const;
  ActiveFn LeafActivity(const Region &reg) const;
  ExprP Hoist(const Region &reg, const ExprP &e, const std::set<int> &below, std::vector<std::string> &defs,
              std::map<std::string, std::string> &names) const;
  Resolver Above(const Region &reg, const std::set<int> &below) const;
  std::string SplitFrom(const Region &reg, const std::set<int> &below, std::set<std::pair<int, int>> cols,
                        const std::vector<std::string> &defs,
                        const std::function<std::string(const std::string &)> &wrap) const;
  std::vector<std::string> FromsBut(const Region &reg, int side) const;

  // group keys (keys_sql.cpp)
  enum class KeyForm { Plain, Distinct, One, Pair };
  KeyForm FormOf(const Rel *r, int k) const;
  std::vector<std::string> KeyCols(const Rel *r, int k, const std::string &x, const std::string &name) const;
  std::string KeyEq(const Rel *r, int k, const std::string &rk) const;
  std::string Groups(const Rel *r, Refs &reads) const;  // adds the cotangent it reads to reads

  // cotangents (accumulate.cpp)
  bool AnyActive(const Rel *r) const;
  void Contribute(const Rel *to, std::string sql, Refs reads, std::set<int> cols, bool carries = false,
                  bool keyed = false);
  void ContributeTransposed(const Rel *to, std::string head, std::string pre, std::string tail,
                            std::vector<std::string> by, Refs reads, std::set<int> cols, bool carries);
  bool MakeCotangent(const Rel *r, std::vector<Step> &ctes);
  // (reads: the backward steps source reads)
  void ContributeToLeaves(Steps &s, const Region &reg, const std::string &source, const Refs &reads, const Terms &terms,
                          const std::function<std::string(int k)> &leaf_rid, const std::string &shared_name,
                          const std::vector<Deferred> &deferred = {}, const Resolver &value = nullptr,
                          std::set<int> roots = {}, const LeafKeys &leaf_keys = nullptr);
  // "b.rk<i> = a.c<j>" for RidKeys(r): matching r's saved rows `a` and its
  // cotangent `b` beside their rids (see RidKeys), or "".
  std::string KeysEq(const Rel *r, const std::string &b, const std::string &a) const;

 private:
  Item CompileItem(const Rel *r, bool through, Region &reg) const;
  std::string FromSql(const Region &reg, const FromNode &n) const;
  void Visit(const RelP &r);
  void VisitSublinks(const ExprP &e);
  void DecideMaterialized();
  void SaveContractionSides();
  void SaveSharedRowLocal();
  int SavedLeaves(const Rel *r) const;
  void RecomputeOnWorkers();
  void BoundProjectionChains();
};

// Accumulates into terms[(side, col)] the contributions of adj · ∂e/∂column,
// reading forward values through `lets` (under `guard`: see Lets). With
// `defer`, factors of products are deferred (see Deferred). (backprop.cpp)
void Backprop(const ExprP &e, const std::string &adj, Lets &lets, const ActiveFn &act, Terms &terms,
              const std::string &guard = "", std::vector<Deferred> *defer = nullptr);
// Whether the terms that Backprop (without `defer`) accumulates for e read a
// value of leaf `side` besides the adjoint they are given: a CASE condition
// on the way to an active column, or an argument or result that a partial
// reads (Rule::reads), that reads the leaf. Decided on e's structure alone;
// the values `lets` computes meanwhile are Lets::Reads's. (backprop.cpp)
bool AdjointReads(const ExprP &e, int side, const ActiveFn &act);

// --- operators (ops/) -------------------------------------------------------

// The facts of a relation's inputs, by input index.
using Inputs = std::function<const std::vector<bool> &(size_t k)>;

// CheckRanks's walk over an expression (refusing a rank used as a value)
// and its refusal.
struct RankCheck {
  std::function<void(const ExprP &, const std::vector<bool> &, bool)> walk;
  std::function<void(const std::string &)> refuse;
};

// Which region an operator's step is built over (Pass::regions).
enum class RegionOf {
  None,   // reads saved inputs by name
  Self,   // a materialized row-local relation: its own region
  Input,  // a window or an aggregate: its input's region
};

// A tangent step's rid: only a LEFT join's test for a missing row reads it
// (non-NULL exactly where the row exists). Not row_number(): hvp
// differentiates the tangent query, where a row_number() OVER () would be
// order-sensitive.
inline constexpr const char *kTangentRid = "1::bigint AS rid";

// One row per operator, like JAX's primitive_jvps / primitive_transposes.
struct OpRule {
  const char *name;
  // analysis, no SQL: per output column, whether it is a rank, cannot be
  // NULL, carries gradient (before held maxima are removed)
  std::vector<bool> (*ranks)(const Rel &r, const Inputs &in, const RankCheck &check);
  std::vector<bool> (*not_null)(const Rel &r, const Inputs &in);
  std::vector<bool> (*activity)(const Rel &r, const Inputs &in);
  // the body of the relation's step f<id> (a materialized relation)
  std::string (*forward)(const Pass &p, const Rel &r);
  // Contribute()s to the inputs from the relation's cotangent b<id>
  void (*reverse)(Pass &p, const Rel &r, Steps &s);
  RegionOf region;
  // forward mode: the body of the relation's step with its tangents, rid,
  // c<j> and t<j> for every column j that depends on a parameter
  std::string (*tangent)(const Pass &p, const Rel &r);
};

const OpRule &RuleOf(const Rel &r);  // by RelKind; a Join by its kind of join

// A saved region's columns besides rid (RegionForward's layout: each leaf's
// rid l<k>, the leaf columns its expressions read, its columns c<j>), which
// a cotangent whose rows are the saved rows one to one may carry, so that
// the region's reverse reads it alone; none where r's step is not a saved
// region (ops/region_op.cpp).
std::vector<std::string> SavedRowCols(const Pass &p, const Rel *r);

// EXISTS / ANY / ALL over a sublink's saved relation (ops/sublink.cpp).
std::string SublinkSql(const Pass &p, const ExprP &e, const Resolver &res);

// A column that merely passes its input's fact through (Filter, Limit, ...),
// and ranks so (a condition may compare them).
std::vector<bool> SameAsInput(const Rel &r, const Inputs &in);
std::vector<bool> PassRanks(const Rel &r, const Inputs &in, const RankCheck &check);
// No column is a rank, cannot be NULL, carries gradient (constants, a
// scalar subquery's value, a FULL join's NOT NULL).
std::vector<bool> NoneOf(const Rel &r, const Inputs &in);
std::vector<bool> NoRanks(const Rel &r, const Inputs &in, const RankCheck &check);
// A join's columns: the left input's, then the right's (its condition may
// compare ranks).
std::vector<bool> JoinedRanks(const Rel &r, const Inputs &in, const RankCheck &check);
std::vector<bool> JoinedActivity(const Rel &r, const Inputs &in);
// Columns that a strict comparison in `cond` reads: not NULL where it held.
void Compared(const ExprP &cond, std::vector<bool> &v);

}  // namespace ddx::core
