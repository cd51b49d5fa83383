// What the dense path's files share (see ddx/pg/dense.h). Internal to
// src/pg/dense.
#pragma once

#include <memory>

#include "ddx/dense/program.h"

namespace ddx::pg::dense_path {

// The program kept under statement id `id` (the number in the dense
// statement's leading comment), or nullptr where it has been forgotten.
std::shared_ptr<const ddx::dense::Program> ProgramOf(int id) noexcept;

// The dense statement kept for SQL program `sql`, or nullptr.
const std::string *StatementFor(const char *sql) noexcept;

// The id in the dense statement's comment that `text` holds (the statement,
// or an EXPLAIN of it), or -1 where it holds none.
int StatementId(const char *text) noexcept;

// A scan's columns in the dense statement: the first of them is column
// kFirstValue + Offset(program, scan) of its rows (1-based), integers as
// int8 and float8 as float8. Columns 1 to 3 are the scan's number, tableoid
// and ctid.
constexpr int kFirstValue = 4;
int Offset(const ddx::dense::Program &p, size_t scan) noexcept;

}  // namespace ddx::pg::dense_path
