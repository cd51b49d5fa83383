// Citus tables as the translator sees them: their kind, keys and unique
// indexes (see translate.h).
#include "internal.h"

namespace ddx::pg {

// Citus keeps its tables in the catalog table pg_catalog.pg_dist_partition
// (logicalrelid regclass, partmethod "char": 'h' hash, 'r' range, 'a' append
// for distributed tables, 'n' none; repmodel "char": 't' for a reference
// table; partkey text: the distribution column as nodeToString of its Var),
// which exists only where the citus extension is created. ddx reads it by
// name, without linking Citus; a heap scan under the catalog snapshot, the
// table having one row per Citus table.
std::string CitusTableKind(Oid relid, bool *hash, AttrNumber *column) {
  struct Raw {
    char method, model;
    AttrNumber column;
  };
  Raw raw = PgCall([&] {
    Raw r{0, 0, InvalidAttrNumber};
    Oid cat = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE);
    if (!OidIsValid(cat)) return r;
    AttrNumber method = get_attnum(cat, "partmethod"), model = get_attnum(cat, "repmodel"),
               partkey = get_attnum(cat, "partkey");
    Relation rel = table_open(cat, AccessShareLock);
    ScanKeyData key;
    ScanKeyInit(&key, get_attnum(cat, "logicalrelid"), BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
    SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, nullptr, 1, &key);
    HeapTuple tup = systable_getnext(scan);
    if (HeapTupleIsValid(tup)) {
      bool isnull = true;
      Datum d = heap_getattr(tup, method, RelationGetDescr(rel), &isnull);
      r.method = isnull ? '?' : DatumGetChar(d);
      d = heap_getattr(tup, model, RelationGetDescr(rel), &isnull);
      r.model = isnull ? '?' : DatumGetChar(d);
      d = partkey == InvalidAttrNumber ? 0 : heap_getattr(tup, partkey, RelationGetDescr(rel), &isnull);
      if (r.method == 'h' && partkey != InvalidAttrNumber && !isnull) {
        Node *key = static_cast<Node *>(stringToNode(TextDatumGetCString(d)));
        if (key && IsA(key, Var)) r.column = castNode(Var, key)->varattno;
      }
    }
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    return r;
  });
  if (hash) *hash = raw.method == 'h';
  if (column) *column = raw.column;
  if (!raw.method) return "";
  if (raw.method == 'h' || raw.method == 'r' || raw.method == 'a') return "distributed table";
  if (raw.model == 't') return "reference table";
  return "table managed by Citus";
}

// Forward mode (jvp, hvp) does not run over Citus tables yet: its tangent
// query would be planned by Citus as a whole, and joins parameter rows to
// their tangents in ways Citus has not been shown to run exactly.
void RefuseCitusTable(Oid relid, const std::string &name, const std::string &role) {
  std::string kind = CitusTableKind(relid);
  if (kind.empty()) return;
  throw Error(sqlstate::kFeatureNotSupported,
              "jvp and hvp do not run over Citus tables yet: " + role + " " + name + " is a Citus " + kind,
              "Reverse mode (grad, vjp, the optimizers, ddx_train) does.",
              "Take the derivative with grad or vjp, or run jvp over plain tables (CREATE TABLE ... AS SELECT ...).");
}

std::vector<AttrNumber> PrimaryKeyAttnos(Oid relid) {
  return PgCall([&] {
    std::vector<AttrNumber> out;
    Oid constraint = InvalidOid;
    Bitmapset *keys = get_primary_key_attnos(relid, false, &constraint);
    int i = -1;
    while ((i = bms_next_member(keys, i)) >= 0) out.push_back(i + FirstLowInvalidHeapAttributeNumber);
    return out;
  });
}

// The attribute numbers of each unique index of relid that says at most one
// row matches an equality on all its columns, in every snapshot: valid,
// immediate (a deferred constraint may be violated until commit), without a
// predicate or an expression column. What the planner asks of an index
// before it removes a join or marks one unique (relation_has_unique_index_for,
// analyzejoins.c).
std::vector<std::vector<AttrNumber>> UniqueIndexAttnos(Oid relid) {
  // (collected as Lists, palloc'd: no C++ object lives where an error may
  // longjmp)
  List *sets = PgCall([&] {
    List *found = NIL;
    Relation rel = table_open(relid, AccessShareLock);
    List *indexes = RelationGetIndexList(rel);
    ListCell *lc;
    foreach (lc, indexes) {
      HeapTuple tp = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
      if (!HeapTupleIsValid(tp)) continue;
      Form_pg_index ix = (Form_pg_index)GETSTRUCT(tp);
      bool usable = ix->indisunique && ix->indimmediate && ix->indisvalid &&
                    heap_attisnull(tp, Anum_pg_index_indpred, NULL) && heap_attisnull(tp, Anum_pg_index_indexprs, NULL);
      List *cols = NIL;
      for (int i = 0; usable && i < ix->indnkeyatts; i++) {
        usable = ix->indkey.values[i] > 0;
        cols = lappend_int(cols, ix->indkey.values[i]);
      }
      if (usable) found = lappend(found, cols);
      ReleaseSysCache(tp);
    }
    list_free(indexes);
    table_close(rel, AccessShareLock);
    return found;
  });
  std::vector<std::vector<AttrNumber>> out;
  ListCell *lc, *c;
  foreach (lc, sets) {
    out.emplace_back();
    foreach (c, static_cast<List *>(lfirst(lc))) out.back().push_back(static_cast<AttrNumber>(lfirst_int(c)));
  }
  return out;
}

// A parameter's table on Citus: a reference table, a table that Citus
// manages on the coordinator, or a table hash-distributed by (a column of)
// its primary key, an embedding; its rows identified by their primary key
// (its placements do not share ctids). A range- or append-distributed table
// is refused (create_distributed_table makes hash tables; ddx places the
// optimizer state of a distributed table co-located with it, which only
// hash distribution offers).
bool CitusParameterTable(Oid relid, const std::string &name, bool *distributed) {
  bool hash = false;
  std::string kind = CitusTableKind(relid, &hash);
  if (distributed) *distributed = kind == "distributed table";
  if (kind.empty()) return false;
  if (kind == "distributed table" && !hash)
    throw Error(sqlstate::kFeatureNotSupported,
                "ddx does not take parameters from a range- or append-distributed table: " + name + " is one",
                "ddx keeps a distributed parameter table's optimizer state co-located with it, which needs hash "
                "distribution.",
                "Distribute the parameters by hash (create_distributed_table), or keep them in a reference table.");
  if (PgCall([&] { return get_rel_relkind(relid); }) != RELKIND_RELATION)
    throw Error(sqlstate::kFeatureNotSupported,
                "ddx does not take parameters from a partitioned Citus table yet: " + name + " is one");
  if (PrimaryKeyAttnos(relid).empty())
    throw Error(sqlstate::kFeatureNotSupported,
                "the parameter's table " + name + " is a Citus " + kind + " without a primary key",
                "On Citus, ddx identifies a parameter row by its primary key: the table's placements do not keep "
                "rows at the same physical positions.",
                "Add a primary key: ALTER TABLE " + name + " ADD PRIMARY KEY (...).");
  return true;
}

Translator::Translator(std::vector<ParamTarget> params, std::vector<Oid> stop_gradient_oids)
    : params_(std::move(params)), stop_oids_(std::move(stop_gradient_oids)) {}

}  // namespace ddx::pg
