// Catalog helpers of the translator: each one PostgreSQL call behind PgCall
// (see internal.h).
#include "internal.h"

extern "C" {
#include "miscadmin.h"
#include "utils/float.h"
#include "utils/guc.h"
}

namespace ddx::pg {

std::string TypeSql(Oid typid, int32 typmod) {
  if (typid == FLOAT8OID) return "pg_catalog.float8";
  if (typid == FLOAT4OID) return "pg_catalog.float4";
  return Str(PgCall(
      [&] { return format_type_extended(typid, typmod, FORMAT_TYPE_FORCE_QUALIFY | FORMAT_TYPE_TYPEMOD_GIVEN); }));
}

Type MakeType(Oid typid, int32 typmod) {
  return Type{TypeSql(typid, typmod), typid == FLOAT8OID || typid == FLOAT4OID || typid == NUMERICOID};
}

Type ExprTypeOf(Node *n) { return MakeType(exprType(n), exprTypmod(n)); }

std::string Qualified(Oid nsp, const char *name) {
  return Str(PgCall([&] { return quote_qualified_identifier(get_namespace_name(nsp), name); }));
}

FuncInfo Func(Oid funcid) {
  FuncInfo fi;
  struct Raw {
    char *qualified;
    char *name;
    char *internal;
    char vol;
    bool retset;
    bool strict;
    bool sql;
    bool builtin;
  };
  Raw raw = PgCall([&] {
    Raw r{nullptr, nullptr, nullptr, 'v', false, false, false, false};
    HeapTuple tp = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
    if (!HeapTupleIsValid(tp)) elog(ERROR, "cache lookup failed for function %u", funcid);
    Form_pg_proc p = (Form_pg_proc)GETSTRUCT(tp);
    r.name = pstrdup(NameStr(p->proname));
    r.qualified = quote_qualified_identifier(get_namespace_name(p->pronamespace), NameStr(p->proname));
    r.vol = p->provolatile;
    r.retset = p->proretset;
    r.strict = p->proisstrict;
    r.sql = p->prolang == SQLlanguageId;
    r.builtin = p->pronamespace == PG_CATALOG_NAMESPACE;
    if (p->pronamespace == PG_CATALOG_NAMESPACE && p->prolang == INTERNALlanguageId) {
      bool isnull;
      Datum src = SysCacheGetAttr(PROCOID, tp, Anum_pg_proc_prosrc, &isnull);
      if (!isnull) r.internal = TextDatumGetCString(src);
    }
    ReleaseSysCache(tp);
    return r;
  });
  fi.qualified = Str(raw.qualified);
  fi.name = Str(raw.name);
  fi.internal = Str(raw.internal);
  fi.is_volatile = raw.vol == PROVOLATILE_VOLATILE;
  fi.retset = raw.retset;
  fi.strict = raw.strict;
  fi.sql = raw.sql;
  fi.builtin = raw.builtin;
  return fi;
}

// The derivative rule of a pg_catalog built-in, by its C symbol; "" if none.
const char *RuleOf(const std::string &internal) {
  static const struct {
    const char *src, *rule;
  } kMap[] = {
      {"float4pl", "add"},
      {"float8pl", "add"},
      {"float48pl", "add"},
      {"float84pl", "add"},
      {"numeric_add", "add"},
      {"float4mi", "sub"},
      {"float8mi", "sub"},
      {"float48mi", "sub"},
      {"float84mi", "sub"},
      {"numeric_sub", "sub"},
      {"float4mul", "mul"},
      {"float8mul", "mul"},
      {"float48mul", "mul"},
      {"float84mul", "mul"},
      {"numeric_mul", "mul"},
      {"float4div", "div"},
      {"float8div", "div"},
      {"float48div", "div"},
      {"float84div", "div"},
      {"numeric_div", "div"},
      {"float4um", "neg"},
      {"float8um", "neg"},
      {"numeric_uminus", "neg"},
      {"float4up", "pos"},
      {"float8up", "pos"},
      {"numeric_uplus", "pos"},
      {"dexp", "exp"},
      {"numeric_exp", "exp"},
      {"dlog1", "ln"},
      {"numeric_ln", "ln"},
      {"dlog10", "log10"},
      {"dsqrt", "sqrt"},
      {"numeric_sqrt", "sqrt"},
      {"dpow", "pow"},
      {"numeric_power", "pow"},
      {"dsign", "sign"},
      {"numeric_sign", "sign"},
      {"float4abs", "abs"},
      {"float8abs", "abs"},
      {"numeric_abs", "abs"},
      {"dsin", "sin"},
      {"dcos", "cos"},
      {"dtan", "tan"},
      {"dasin", "asin"},
      {"dacos", "acos"},
      {"datan", "atan"},
      {"dsinh", "sinh"},
      {"dcosh", "cosh"},
      {"dtanh", "tanh"},
      {"ftod", "cast"},
      {"dtof", "cast"},
      {"numeric_float8", "cast"},
      {"numeric_float4", "cast"},
      {"float8_numeric", "cast"},
      {"float4_numeric", "cast"},
      {"i2tod", "cast"},
      {"i4tod", "cast"},
      {"i8tod", "cast"},
      {"i2tof", "cast"},
      {"i4tof", "cast"},
      {"i8tof", "cast"},
      {"int4_numeric", "cast"},
      {"int8_numeric", "cast"},
      {"int2_numeric", "cast"},
  };
  if (internal.empty()) return "";
  for (const auto &m : kMap)
    if (internal == m.src) return m.rule;
  return "";
}

// A constant of the loss as the literal the program is printed with. The
// type's output function writes under the session's settings, and a float's
// digits are extra_float_digits's: at -15 the loss's '0.123456789'::float8
// was printed 0.1, and the gradient was that of another loss, without a
// word. So the output is written as postgres_fdw writes what another server
// reads back (deparse.c, set_transmission_modes): floats exact
// (a positive extra_float_digits: since PostgreSQL 12 the shortest text
// that reads back to the same value), dates ISO (read back alike under
// every DateStyle, a timestamptz with its offset), intervals in postgres
// style, each set for the call only (GUC_ACTION_SAVE, undone by
// AtEOXact_GUC, or by the abort of an error) and only where the session's
// differs: the defaults need none, and AtEOXact_GUC walks every setting.
std::string ConstSql(Const *c) {
  std::string type = TypeSql(c->consttype, c->consttypmod);
  if (c->constisnull) return "NULL::" + type;
  std::string lit = Str(PgCall([&] {
    Oid out;
    bool varlena;
    getTypeOutputInfo(c->consttype, &out, &varlena);
    bool iso = DateStyle == USE_ISO_DATES, postgres = IntervalStyle == INTSTYLE_POSTGRES,
         exact = extra_float_digits > 0;
    if (iso && postgres && exact) return quote_literal_cstr(OidOutputFunctionCall(out, c->constvalue));
    int nest = NewGUCNestLevel();
    if (!iso) (void)set_config_option("datestyle", "ISO", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
    if (!postgres)
      (void)set_config_option("intervalstyle", "postgres", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
    if (!exact)
      (void)set_config_option("extra_float_digits", "1", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
    char *text = OidOutputFunctionCall(out, c->constvalue);
    AtEOXact_GUC(true, nest);
    return quote_literal_cstr(text);
  }));
  return "(" + lit + "::" + type + ")";
}

std::string OperatorSql(Oid opno) {
  return Str(PgCall([&] {
    HeapTuple tp = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
    if (!HeapTupleIsValid(tp)) elog(ERROR, "cache lookup failed for operator %u", opno);
    Form_pg_operator op = (Form_pg_operator)GETSTRUCT(tp);
    char *s = psprintf("OPERATOR(%s.%s)", quote_identifier(get_namespace_name(op->oprnamespace)), NameStr(op->oprname));
    ReleaseSysCache(tp);
    return s;
  }));
}

int RelNatts(Oid relid) {
  return PgCall([&] {
    HeapTuple tp = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
    if (!HeapTupleIsValid(tp)) elog(ERROR, "cache lookup failed for relation %u", relid);
    int n = ((Form_pg_class)GETSTRUCT(tp))->relnatts;
    ReleaseSysCache(tp);
    return n;
  });
}

bool InSameInheritanceTree(Oid a, Oid b) {
  if (a == b) return true;
  return PgCall([&] {
    return list_member_oid(find_all_inheritors(a, NoLock, NULL), b) ||
           list_member_oid(find_all_inheritors(b, NoLock, NULL), a);
  });
}

}  // namespace ddx::pg
