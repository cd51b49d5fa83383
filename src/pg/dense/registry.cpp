// The dense programs a backend keeps (ddx/pg/dense.h), and their
// statements. Pure C++: the hook calls in with its own C++ state, and the
// runner and the node look up under PostgreSQL's.
//
// Why a registry, not the program in the plan: a gradient program's text is
// what the hook gives the runner (an argument of _ddx.grad_at), and a kept
// plan of the calling statement outlives the hook's call by as long as the
// session keeps it. The program is compiled from the loss's IR, which only
// the hook has, so it is kept here under that text, at most kMaxKept of
// them, the least recently kept dropped first. A program no longer here
// (dropped, or a statement parsed before ddx.dense mattered) is not an
// error: the runner takes the SQL program, which is always there.
#include <cstdio>
#include <cstring>
#include <list>
#include <map>
#include <string>

#include "ddx/pg/dense.h"
#include "internal.h"

namespace ddx::pg {

namespace {

struct Kept {
  std::string sql;        // the SQL program's text
  std::string types;      // the loss's types (Signature)
  std::string statement;  // the dense statement (starts with its id's comment)
  int id = 0;
  dense_path::Compiled compiled;
  std::vector<dense_path::ColumnCheck> checks;
};

// The types of every relation's columns and every expression of the loss,
// in one string. The SQL program's text does not name the types of the
// columns it reads (t."f" AS c0, a join's $1 = $2): after ALTER TABLE ...
// TYPE, or a table dropped and made again, a loss has the same text and
// another meaning, which the program compiled for the old types must not
// be run for (a review found float8 keys read as the old int8's).
void Signature(const Expr &e, std::string *out) {
  *out += "(" + std::to_string(static_cast<int>(e.kind)) + " " + e.type.sql + " " + e.text;
  for (const ExprP &a : e.args)
    if (a) Signature(*a, out);
  *out += ")";
}

// (each relation spelled once, then named by its number: a relation read
// by several readers, a CTE, is one Rel of the DAG, and spelling it out per
// reader grew the string exponentially with the GPT's layers, a review
// found: minutes of parsing, gigabytes, with ddx.dense off)
void Signature(const Rel &r, std::string *out, std::map<const Rel *, size_t> *seen) {
  auto it = seen->find(&r);
  if (it != seen->end()) {
    *out += "[@" + std::to_string(it->second) + "]";
    return;
  }
  size_t me = seen->size();
  (*seen)[&r] = me;
  *out += "[" + std::to_string(static_cast<int>(r.kind)) + " " + r.table;
  for (const Type &t : r.cols) *out += " " + t.sql;
  for (const ExprP &e : r.exprs)
    if (e) Signature(*e, out);
  if (r.cond) Signature(*r.cond, out);
  for (const RelP &in : r.inputs)
    if (in) Signature(*in, out, seen);
  *out += "]";
}

std::list<Kept> kept;  // most recently kept first
int next_id = 1;
constexpr size_t kMaxKept = 64;
constexpr size_t kMaxColumns = 1664;  // (MaxTupleAttributeNumber: a target list's limit)

// The dense statement of program `p`: one SELECT per scan, of its number,
// tableoid, ctid (NULL in a scan without parameters) and columns, each scan's columns at positions of their own
// (NULL in the other scans' rows), in one UNION ALL.
std::string StatementOf(const dense::Program &p, int id) {
  const std::vector<const Rel *> &scans = dense::Scans(p);
  std::vector<std::string> types;  // per position
  // (the columns' own types: no cast per row; a column the program does not
  // read is not read here either)
  for (const Rel *s : scans)
    for (size_t c = 0; c < s->cols.size(); c++) types.push_back(dense::ReadsColumn(p, s, c) ? s->cols[c].sql : "");
  std::string out = "/* ddx dense program " + std::to_string(id) + " */ ";
  for (size_t k = 0; k < scans.size(); k++) {
    const Rel *s = scans[k];
    size_t first = static_cast<size_t>(dense_path::Offset(p, k));
    if (k) out += " UNION ALL ";
    // (a row's tableoid and ctid only where the scan has a parameter: they
    // name the rows whose gradients the node returns)
    bool params = false;
    for (int q : s->param) params = params || q >= 0;
    out += "SELECT " + std::to_string(k) + (params ? "::int4, tableoid, ctid" : "::int4, NULL::oid, NULL::tid");
    for (size_t j = 0; j < types.size(); j++) {
      if (types[j].empty())
        out += ", NULL::float8";
      else if (j >= first && j < first + s->cols.size())
        out += ", " + s->names[j - first] + "::" + types[j];
      else
        out += ", NULL::" + types[j];
    }
    out += std::string(" FROM ") + (s->only ? "ONLY " : "") + s->table;
  }
  return out;
}

}  // namespace

std::string KeepDenseProgram(const std::string &sql, const RelP &loss, bool reads_params) noexcept {
  try {
    std::string types;
    std::map<const Rel *, size_t> seen;
    Signature(*loss, &types, &seen);
    for (auto it = kept.begin(); it != kept.end(); ++it) {
      if (it->sql != sql) continue;
      if (it->types == types) {
        kept.splice(kept.begin(), kept, it);  // (the same text and types: the same program)
        return "";
      }
      kept.erase(it);  // (compiled for other types: compiled again, under a new id)
      break;
    }
    if (reads_params) return "the loss reads a statement parameter";
    std::string why;
    std::shared_ptr<const dense::Program> p = dense::Compile(loss, &why);
    if (!p) return why;
    size_t width = 3;  // (the dense statement's columns: PostgreSQL's limit is 1664)
    for (const Rel *s : dense::Scans(*p)) {
      if (s->citus || s->names.size() != s->cols.size()) return "a scan of a Citus table";
      width += s->cols.size();
    }
    if (width > kMaxColumns) return "more columns than one statement's row holds";
    Kept k;
    k.sql = sql;
    k.types = std::move(types);
    k.id = next_id++;
    k.statement = StatementOf(*p, k.id);
    k.compiled.loss = loss;
    k.compiled.program = p;
    for (const Rel *scan : dense::Scans(*p))
      for (size_t c = 0; c < scan->cols.size(); c++)
        if (dense::ReadsColumn(*p, scan, c)) k.checks.push_back({scan->table, scan->names[c], scan->cols[c].sql});
    kept.push_front(std::move(k));
    if (kept.size() > kMaxKept) kept.pop_back();
    return "";
  } catch (...) {
    return "out of memory";  // (the SQL program runs)
  }
}

namespace dense_path {

Compiled ProgramOf(int id) noexcept {
  for (const Kept &k : kept)
    if (k.id == id) return k.compiled;
  return Compiled();
}

const std::string *StatementFor(const char *sql, const std::vector<ColumnCheck> **checks) noexcept {
  for (const Kept &k : kept)
    if (k.sql == sql) {
      *checks = &k.checks;
      return &k.statement;
    }
  return nullptr;
}

void Forget(const char *sql) noexcept {
  for (auto it = kept.begin(); it != kept.end(); ++it)
    if (it->sql == sql) {
      kept.erase(it);
      return;
    }
}

int StatementId(const char *text) noexcept {
  const char *at = text ? strstr(text, "/* ddx dense program ") : nullptr;
  int id = -1, end = 0;
  if (!at || sscanf(at, "/* ddx dense program %d */%n", &id, &end) != 1 || end == 0) return -1;
  return id;
}

int Offset(const dense::Program &p, size_t scan) noexcept {
  int at = 0;
  for (size_t k = 0; k < scan; k++) at += static_cast<int>(dense::Scans(p)[k]->cols.size());
  return at;
}

}  // namespace dense_path

}  // namespace ddx::pg
