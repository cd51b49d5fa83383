// Builders of IR nodes (ir.h), one per kind of node that is made in more than
// one place: the adapter's translator (src/pg), the core's regions and
// value layers, and the unit tests build their nodes with these, so that a
// node is made the same way everywhere: its kind and the fields that go
// with it set, every other field left as ir.h defaults it, and a relation's
// output columns (Rel::cols) derived from its inputs where they follow from
// them.
//
// Pure C++17 (see pure.h). Names and argument orders are the translator's,
// which builds most of the IR: an expression's arguments before its type,
// a relation's inputs before what it computes over them.
#pragma once

#include <string>
#include <vector>

#include "ddx/core/ir.h"
#include "ddx/core/pure.h"

namespace ddx {

// Types that the builders' callers name often.
inline const Type kBool{"pg_catalog.bool", false};
inline const Type kInt4{"pg_catalog.int4", false};
inline const Type kInt8{"pg_catalog.int8", false};
inline const Type kFloat8{"pg_catalog.float8", true};

// --- expressions -------------------------------------------------------------

// Column `col` of the relation on `side` (see Expr; the core numbers a
// region's leaves from kLeafSide, pass.h, and reads a leaf's rid as its
// column -1).
ExprP MakeCol(int col, int side, Type t);
// A constant: `text` a complete SQL literal ('1.5'::pg_catalog.float8), or,
// inside the core, SQL already printed that stands for a value.
ExprP MakeConst(std::string text, Type t);
// NULL of type t (NULL::<t>).
ExprP NullOf(const Type &t);
// An operation with a derivative rule (rules.h), by the rule's name.
ExprP MakeCall(std::string rule, std::vector<ExprP> args, Type t);
// An operation without one: an SQL template over $1..$n, and `name`, what a
// user calls it (in errors; a name "=" or "AND" also marks an equality or a
// conjunction for the core's analyses).
ExprP MakeOpaque(std::string tmpl, std::string name, std::vector<ExprP> args, Type t, bool is_volatile = false);
// One that the core makes for itself, named by its template.
ExprP MakeOpaque(const std::string &tmpl, std::vector<ExprP> args, Type t);
// CASE: args = cond1, value1, cond2, value2, ..., else.
ExprP MakeCase(std::vector<ExprP> args, Type t);

// --- relations ---------------------------------------------------------------

// A relation of kind k, every field to be set by the caller.
RelP NewRel(RelKind k);
// A scan of `table` (schema-qualified, quoted): its columns' quoted names
// and types, and per column its parameter index or -1.
RelP MakeScan(std::string table, std::vector<std::string> names, std::vector<Type> cols, std::vector<int> param);
// exprs over `in`, one output column each.
RelP MakeProject(RelP in, std::vector<ExprP> exprs);
// The rows of `in` where cond holds.
RelP MakeFilter(RelP in, ExprP cond);
// l ⋈ r on cond (nullptr: a cross join); the left's columns, then the right's.
RelP MakeJoin(RelP l, RelP r, JoinKind jk, ExprP cond);
// `in` grouped by its first nkeys columns; cols: the keys' types, then the
// aggregates'.
RelP MakeAggregate(RelP in, int nkeys, std::vector<AggCall> aggs, std::vector<Type> cols);

}  // namespace ddx
