// The dense program's graph (include/ddx/dense/program.h): what Compile
// (compile.cpp) makes of the loss's relations and Run (run.cpp) computes
// over. Internal to src/dense.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "ddx/core/ir.h"
#include "ddx/dense/program.h"

namespace ddx::dense {

bool IsFloat8(const Type &t);
// A numeric constant's value, as PostgreSQL reads it; false for anything else.
bool ConstValue(const Expr &e, double *v);

// A column of a relation: a coordinate (of one of its node's dims) or a value.
struct Column {
  int dim = -1;         // >= 0: a coordinate of dim `dim`, one of its node's own
  bool active = false;  // a value that carries gradient: one that reads a parameter column
  // A value that no reader on the way to the loss reads (Compile's Uses): not
  // computed, not copied, not checked for NULLs, of any type (a table's text
  // or timestamp columns beside its keys and values). Keys are always used:
  // they are the cells.
  bool used = true;
};

// Whether e reads an active column of `in` (Column::active): where the SQL
// program writes no term, the dense one computes no partial (whose float
// checks could raise where PostgreSQL's never run).
bool ReadsActive(const Expr &e, const std::vector<Column> &in);

// A comparison of two key columns of a join's or filter's rows (k.t <= q.t:
// causal attention): a cell exists where it holds. Columns ca and cb of the
// node and their dims; op one of < <= > >= <> = (an equality of keys of two
// sides of a join is no mask: it makes their dims one).
struct Mask {
  int ca = -1, cb = -1;
  std::string op;
  int da = -1, db = -1;
  double constant = 0.0;  // where cb < 0 and vcol < 0: the key is compared with this (g.step = 1)
  int vcol = -1;          // where >= 0: the key is compared with this float8 column (lab.val = l.c)
};

// A grouped sum of products of a join's two sides, sum(l.a * r.b) GROUP BY
// the dims of one side or the other (each dim that is summed over in both
// sides, none in both kept): a matrix product (Contract), the join and the
// projection between never formed.
struct Product {
  int join = -1, project = -1;  // the nodes it stands for (read by it alone)
  int left = -1, right = -1;    // the join's inputs
  int lcol = -1, rcol = -1;     // the product's columns in them
  // the dims: the left's kept (rows) and summed (k), the right's summed (kr,
  // in k's order) and kept (cols), each side's own; rows_a and cols_a the
  // grouping's that rows and cols become
  std::vector<int> rows, k, kr, cols, rows_a, cols_a;
  std::vector<Mask> masks;  // the join's comparisons, of kept dims only, over the grouping's dims
};

// A relation of the program. Its dims are its own: a reader makes its own
// copy of each dim of its inputs (`from`), so that two readers of one
// relation (attention's q and k, both x's rows) keep theirs apart, and a
// join's equality makes two of its own one. Which values a dim takes is
// shared by a dim and its copies, and by the dims an equality makes one
// (Program::Find: a class's positions, Run's).
struct Node {
  const Rel *rel = nullptr;
  std::vector<int> inputs;  // node indexes
  std::vector<Column> cols;
  std::vector<int> dims;               // its tensor's dims, row-major
  std::vector<std::vector<int>> from;  // per input, per dim of the input (its place): its copy here, or -1
  std::vector<Mask> masks;
  bool fused = false;  // computed by the Product of the node reading it
  Product product;     // an Aggregate's, where product.join >= 0
};

class Program {
 public:
  std::vector<Node> nodes;  // inputs before their readers; the loss last
  std::vector<const Rel *> scans;
  std::vector<int> parent;  // union-find over dims: which share their values
  int Find(int d) const {
    while (parent[d] != d) d = parent[d];
    return d;
  }
  void Unite(int a, int b) {
    a = Find(a);
    b = Find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
  int NewDim() {
    parent.push_back(static_cast<int>(parent.size()));
    return static_cast<int>(parent.size()) - 1;
  }
};

}  // namespace ddx::dense
