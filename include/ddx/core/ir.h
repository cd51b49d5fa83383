// The relational IR that ddx differentiates: relations (scans, projections,
// filters, joins, aggregates, set operations) over scalar expressions.
//
// Pure C++17: this header and everything under src/core never include a
// PostgreSQL header (see pure.h). The adapter (src/pg) builds these objects from
// an analyzed Query; the program builder (program.h) turns them into SQL.
//
// Invariants:
//  - Every Rel's output columns are numbered 0..n-1 and typed (Type).
//  - Expressions refer to columns of the relation they are evaluated over by
//    index (Expr::col). side 1 refers to the relation of an enclosing sublink.
//  - A Rel may be shared (a CTE read twice); the builder treats the graph as a
//    DAG and sums the cotangents of all readers.
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "ddx/core/pure.h"

namespace ddx {

// SQLSTATEs that the core raises; the adapter maps them to ereport codes.
namespace sqlstate {
inline constexpr const char *kInvalidParameterValue = "22023";
inline constexpr const char *kUndefinedTable = "42P01";
inline constexpr const char *kUndefinedColumn = "42703";
inline constexpr const char *kDatatypeMismatch = "42804";
inline constexpr const char *kFeatureNotSupported = "0A000";
inline constexpr const char *kUndefinedFunction = "42883";
inline constexpr const char *kInternalError = "XX000";
}  // namespace sqlstate

// An error meant for the user: SQLSTATE, message, detail, hint and the
// position (1-based, in the statement's source text) when known.
struct Error : std::exception {
  std::string code, message, detail, hint;
  int position = -1;
  Error(std::string c, std::string m, std::string d = "", std::string h = "", int pos = -1)
      : code(std::move(c)), message(std::move(m)), detail(std::move(d)), hint(std::move(h)), position(pos) {}
  const char *what() const noexcept override { return message.c_str(); }
};

// A column or expression type: its SQL spelling (schema-qualified where it
// matters) and whether values of it can carry a gradient (float4, float8,
// numeric).
struct Type {
  std::string sql;
  bool differentiable = false;
};

enum class ExprKind { Col, Const, Call, Case, Opaque, Sublink };
enum class SublinkKind { Exists, Any, All };

struct Rel;
struct Expr;
using ExprP = std::shared_ptr<const Expr>;
using RelP = std::shared_ptr<Rel>;

// A scalar expression.
//  Col:     column `col` of the relation on `side` (0: evaluated relation,
//           1: the relation of the enclosing sublink).
//  Const:   `text` is a complete SQL literal, e.g. '1.5'::pg_catalog.float8.
//  Call:    an operation with a derivative rule; `text` names the rule.
//  Case:    args = cond1, value1, cond2, value2, ..., else (always present).
//  Opaque:  an operation without a derivative rule; `text` is an SQL template
//           where $1..$n stand for the arguments; `name` is what a user calls
//           it (for errors).
//  Sublink: EXISTS / ANY / ALL over relation `sub`; `test` compares the
//           current row with a row of `sub` (side 1), `corr` is the
//           correlation condition (either may be null).
struct Expr {
  ExprKind kind = ExprKind::Const;
  Type type;
  int col = -1;
  int side = 0;
  std::string text;
  std::string name;
  std::vector<ExprP> args;
  bool is_volatile = false;
  bool strict = false;  // Opaque: NULL whenever an argument is NULL
  RelP sub;
  SublinkKind sublink = SublinkKind::Exists;
  ExprP test, corr;
};

enum class RelKind {
  Scan,       // a table; rows identified by (tableoid, ctid)
  Values,     // VALUES lists
  Function,   // a set-returning function (exprs[0]) with one output column
  Project,    // exprs over the input
  Filter,     // cond over the input
  Join,       // inputs[0] ⋈ inputs[1] on cond; output = left cols ++ right cols
  Aggregate,  // keys = first nkeys input columns; output = keys ++ aggs
  UnionAll,   // inputs with the same arity
  Limit,      // ORDER BY order LIMIT limit OFFSET offset
  Scalar,     // exactly one row: the single value of inputs[0] (or NULL)
  Window,     // input columns ++ one column per window call (wins)
};

enum class JoinKind { Inner, Left, Full };

struct AggCall {
  std::string fn;  // sum, avg, count, min, max
  int arg = -1;    // input column, -1 for count(*)
};

// A window call of a Window relation, over the input's columns.
//  sum, avg, count, min, max: the aggregate of `arg` (-1: count(*)) over the frame.
//  lag, lead: `arg` shifted by the constant `offset` rows, `dflt` (-1: NULL) outside.
//  row_number, rank, dense_rank: ranks; they carry no gradient and may only
//  be compared (filters: top-k), never used as values.
struct WinCall {
  std::string fn;
  int arg = -1;
  int dflt = -1;
  std::string offset = "1";  // lag/lead: SQL integer constant
};

enum class FrameMode { Rows, Range, Groups };
enum class BoundKind { UnboundedPreceding, Preceding, CurrentRow, Following, UnboundedFollowing };

struct FrameBound {
  BoundKind kind = BoundKind::UnboundedPreceding;
  std::string offset;  // Preceding/Following: SQL constant
};

// A window frame as SQL spells it: mode, bounds, exclusion ("", "CURRENT
// ROW", "GROUP", "TIES").
struct Frame {
  FrameMode mode = FrameMode::Range;
  FrameBound start{BoundKind::UnboundedPreceding, ""};
  FrameBound end{BoundKind::UnboundedFollowing, ""};
  std::string exclude;
};

struct SortKey {
  int col = 0;
  bool desc = false;
  bool nulls_first = false;
};

struct Rel {
  RelKind kind = RelKind::Scan;
  std::vector<Type> cols;
  std::vector<RelP> inputs;

  // Scan
  std::string table;               // schema-qualified, quoted
  bool only = false;               // FROM ONLY
  bool single = false;             // one heap relation: ctid alone identifies a row
  std::vector<std::string> names;  // quoted column names, one per column
  std::vector<int> param;          // per column: parameter index, or -1
  std::vector<bool> notnull;       // per column: declared NOT NULL
  // The column sets of its unique indexes (immediate, valid, no predicate,
  // no expression), where it is one heap relation (`single`): an equality
  // join on every column of one matches at most one of its rows.
  std::vector<std::vector<int>> unique;
  // A Citus table: read through a saved copy (whose rid does not depend on
  // which shard or placement a row came from), and, where it has parameters,
  // its rows identified by `identity`, its primary key's quoted column names
  // (a reference table's placements do not share ctids).
  bool citus = false;
  std::vector<std::string> identity;

  // Values
  std::vector<std::vector<ExprP>> rows;

  // Project; Function: exprs[0] is the set-returning call
  std::vector<ExprP> exprs;

  // Filter, Join
  ExprP cond;
  JoinKind join = JoinKind::Inner;

  // Aggregate
  int nkeys = 0;          // 0: no GROUP BY, exactly one output row
  bool distinct = false;  // SELECT DISTINCT: keys share gradient with duplicates
  std::vector<AggCall> aggs;

  // Limit, Window (the window's ORDER BY)
  std::vector<SortKey> order;
  std::string limit, offset;  // SQL, empty when absent

  // Window: PARTITION BY input columns, ORDER BY `order`, one frame for all
  // aggregate calls.
  std::vector<int> partition;
  std::vector<WinCall> wins;
  Frame frame;
};

}  // namespace ddx
