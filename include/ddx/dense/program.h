// A loss and its gradient on dense arrays (issue 38): the second way to run
// what the core's SQL program runs, for losses whose relations are tensors.
// Pure C++ (no PostgreSQL headers), like src/core. What feeds it (a scan's
// rows) and what it returns (a gradient per parameter row) are the
// adapter's to move; nothing here reads a table.
//
// The model. Every relation of the loss is a tensor: its rows are the cells
// of an array over dims of its own, copies of its inputs' (a reader's own:
// attention's q and k both read x, and pair q's t with k's), two of which a
// join's equality of keys makes one (x.f = w.f). A scan's integer columns
// are its coordinates (unique per row: a row is a cell), its float8 columns
// values. A join is the broadcast of its two sides over the union of their
// dims (a cell exists where both sides' exist); a projection computes values
// cell by cell with the scalar rules (include/ddx/dense/scalar.h) and keeps
// its input's dims, the ones it does not show included (a row of SQL's bag
// per cell); a grouping sums over the dims its keys do not name (a group
// exists where one of its cells does). That is SQL's semantics for these
// relations, so the loss is PostgreSQL's up to the order of its additions.
// The gradient follows the same graph backwards: a sum's adjoint broadcast
// to its cells, a projection's by the rules' partials (as the SQL program's
// terms: adj, -adj or adj * partial, with PostgreSQL's float8 checks), a
// join's summed over the other side's dims, a scan's read at each row's
// cell.
//
// What is accepted (Compile says why not): scans of integer and float8
// columns; inner joins and filters whose conditions compare a key with a
// key, an integer constant or a float8 value (the key cast to float8): = of
// a key of each side makes their dims one, any other comparison keeps the
// cells where it holds (a causal mask, WHERE g.step = 1, a label's class);
// projections of columns and of float8 expressions of the scalar rules over
// float8 columns and numeric constants; groupings by integer columns with
// sum, avg, max and min of float8 values (their adjoints the SQL program's:
// d, d / n, d shared by the ties); a loss of one row and one float8 column.
// What Run refuses (the caller then takes the SQL program): a NULL value or
// key, two rows with the same coordinates, a key past 2^53, arrays past the
// memory limit, a loss that is NULL, and a float error (reported as
// PostgreSQL's Fault: the program evaluates every cell, where the SQL
// program evaluates only the rows its plan reaches, so whether PostgreSQL
// raises it is the SQL program's to find).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ddx/core/ir.h"
#include "ddx/dense/scalar.h"

namespace ddx::dense {

// A scan's rows as Run reads them: per column of the scan, its values (an
// integer column's exactly, as doubles: |v| < 2^53) and NULL flags.
struct Rows {
  size_t n = 0;
  std::vector<std::vector<double>> val;
  std::vector<std::vector<uint8_t>> null;
};

// The gradient of the loss with respect to column `col` of scan `scan`,
// one value per row of its Rows (0 where the loss does not read the row).
struct ColumnGradient {
  const Rel *scan = nullptr;
  int col = -1;
  std::vector<double> val;
};

struct Outcome {
  bool done = false;           // false: refused (why), the SQL program's to run
  std::string why;             // a refusal's reason
  Fault fault = Fault::kNone;  // a float error PostgreSQL would raise on a row, seen (done false)
  double loss = 0.0;
  std::vector<ColumnGradient> grads;  // one per parameter column (Rel::param >= 0) of each scan
  size_t bytes = 0;                   // the arrays' peak memory
  int products = 0;                   // groupings computed as matrix products
  bool interrupted = false;           // stopped because `interrupted` said so (done false)
};

class Program;

// Whether a scan's column of type `t` is a key (an integer column: smallint,
// integer or bigint); Run reads keys as exact doubles.
bool IsKeyType(const Type &t);

// The program of the loss `loss` (the root of the core's IR, one row of
// one float8 column), or nullptr with the reason in *why.
std::shared_ptr<const Program> Compile(const RelP &loss, std::string *why);

// The scans a program reads, in the order Run wants their rows.
const std::vector<const Rel *> &Scans(const Program &p);

// Whether Run reads column `col` of scan `scan` (a key, or a value on the
// way to the loss): the others' Rows may be left empty, of any type.
bool ReadsColumn(const Program &p, const Rel *scan, size_t col);

// The loss and its gradients over the scans' rows (rows[i] for Scans(p)[i]),
// with at most `limit` bytes of arrays. `interrupted`, where given, is asked
// between the program's steps (a step is one relation's arrays: a few
// milliseconds at the bench's sizes): true stops the run (the caller's
// cancel, statement timeout or termination, which it then serves).
Outcome Run(const Program &p, const std::vector<const Rows *> &rows, size_t limit, bool (*interrupted)() = nullptr);

}  // namespace ddx::dense
