// What the dense path's files share (see ddx/pg/dense.h). Internal to
// src/pg/dense.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ddx/dense/program.h"

namespace ddx::pg::dense_path {

// A compiled program and the loss it was compiled from, whose Rels its
// pointers point into (a node holds both while it runs: the registry may
// drop them meanwhile).
struct Compiled {
  ddx::RelP loss;
  std::shared_ptr<const ddx::dense::Program> program;
};

// The program kept under statement id `id` (the number in the dense
// statement's leading comment); empty where it has been forgotten.
Compiled ProgramOf(int id) noexcept;

// A column a kept program reads, as the program was compiled for it: its
// table's and its own quoted names, and its type as the translator spells it.
struct ColumnCheck {
  std::string table, column, type;
};

// The dense statement kept for SQL program `sql`, and in *checks the
// columns it reads; or nullptr.
const std::string *StatementFor(const char *sql, const std::vector<ColumnCheck> **checks) noexcept;

// Drops the program kept for `sql`.
void Forget(const char *sql) noexcept;

// The id in the dense statement's comment that `text` holds (the statement,
// or an EXPLAIN of it), or -1 where it holds none.
int StatementId(const char *text) noexcept;

// A scan's columns in the dense statement: the first of them is column
// kFirstValue + Offset(program, scan) of its rows (1-based), integers as
// in their own types (smallint, integer, bigint or float8). Columns 1 to 3 are the scan's number, tableoid
// and ctid.
constexpr int kFirstValue = 4;
int Offset(const ddx::dense::Program &p, size_t scan) noexcept;

}  // namespace ddx::pg::dense_path
