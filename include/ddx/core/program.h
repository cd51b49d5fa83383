// The program builder: turns a loss relation into one SQL statement that
// computes the loss's forward relations and then, rule by rule in reverse
// topological order, the cotangent of every relation that gradient reaches.
//
// The statement returns rows (toid oid, tid tid, pidx int4, g float8, key
// text): the gradient of the loss with respect to parameter `pidx` in the
// row of table `toid` at `tid`, or, for a table whose rows are identified by
// primary key (Rel::identity: a Citus table), tid NULL and key the text of
// ROW(key columns in attribute order). Extra rows carry checks for the runner: pidx = -1 the
// number of rows the loss relation produced (more than one is refused),
// pidx = -3 the number of rows whose window values depend on how PostgreSQL
// orders ties (any is refused, 42P20), pidx = kLossValue the loss's value
// (ddx_value).
//
// Saved relations are MATERIALIZED CTEs with a `rid` unique within them, so
// that a backward step pairs a cotangent with exactly the forward row it
// belongs to, also for duplicate rows; plain tables read only by regions are
// read in place, their ctid the rid.
#pragma once

#include <string>
#include <vector>

#include "ddx/core/ir.h"
#include "ddx/core/pure.h"

namespace ddx {

inline constexpr int kLossValue = -4;

struct Program {
  std::string sql;
  int forward_steps = 0;
  int backward_steps = 0;
};

// Citus (Rel::citus scans). Gathered: every Citus table read through a saved
// copy, which Citus gathers on the coordinator, the rest of the program over
// intermediate results (Citus plans any program so). InPlace: the Citus
// tables without parameters (the data) read in place, so that Citus can run
// the per-row work where the rows are; no OFFSET 0 fences (Citus pulls a
// subquery with OFFSET to the coordinator) and no EXISTS pre-filters (Citus
// refuses a correlated subquery beside a CTE). Citus cannot plan every
// program so: the runner falls back to the gathered one.
enum class CitusPlacement { Gathered, InPlace };

// Builds the gradient program of `loss` (one row, one differentiable column)
// with respect to the scan columns whose Rel::param is >= 0, for an executor
// with the contraction node (ddx.contraction not off) or without: the two
// programs save different relations (graph.cpp). Throws Error.
Program BuildGradientProgram(const RelP &loss, CitusPlacement citus = CitusPlacement::Gathered,
                             bool contraction_node = true);

// Whether `loss` reads a Citus table without parameters (whose in-place
// program differs from the gathered one).
bool ReadsCitusData(const RelP &loss);

// Per parameter index 0 .. nparams-1: whether `loss` reads a scan of the
// parameter's table (directly, or through a view, CTE or subquery it reads),
// whatever it does with the column.
std::vector<bool> ParamsRead(const RelP &loss, size_t nparams);

// Which output columns of `rel` depend on a parameter (vjp: the others are
// the output's keys).
std::vector<bool> ActiveColumns(const RelP &rel);

// a = b, also for two NULLs, as a boolean expression that PostgreSQL can
// hash-join where the type has a stand-in for NULL (IS NOT DISTINCT FROM
// cannot be hashed or merged; it is the fallback for other types).
ExprP NullSafeEquals(const ExprP &a, const ExprP &b);

// The forward SQL of `loss` alone (its value), for checks and explain.
std::string BuildForwardSql(const RelP &loss);

// A parameter column's tangent relation, for jvp: `rel`'s column `value` is
// the tangent of the parameter in the row whose key columns equal `keys`
// (rel's column, the quoted name of the parameter table's column). A row
// without a tangent row has tangent 0; a NULL value has a NULL tangent.
struct Tangent {
  RelP rel;
  int value = -1;
  std::vector<std::pair<int, std::string>> keys;
};

// Forward mode: one query whose rows are `out`'s rows, its columns c0 ..
// c<n-1> followed by t0 .. t<n-1> (float8), each column's derivative along
// the tangents (tangents[k] of the scan columns whose Rel::param is k): 0
// where a column does not depend on a parameter, NULL where its value is
// NULL. No tape: every relation's step carries tangent columns beside its
// values. Throws Error (0A000 where forward mode has no rule). Run: the
// query jvp runs, its steps fenced for PostgreSQL's planner; Differentiate:
// the same steps as plain CTE bodies, for hvp to translate back to IR, with
// every stop_gradient(x) printed as a call of `stop_gradient_sql` (the
// schema-qualified SQL function), so that it stays a constant at the next
// order (JAX's stop_gradient, torch's detach()).
enum class TangentUse { Run, Differentiate };
std::string BuildTangentSql(const RelP &out, const std::vector<Tangent> &tangents, TangentUse use = TangentUse::Run,
                            const std::string &stop_gradient_sql = "");

}  // namespace ddx
