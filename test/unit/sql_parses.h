// Test helper: whether PostgreSQL's own grammar (libpg_query) accepts a statement.
#pragma once
#include <pg_query.h>

#include <string>

inline std::string ParseError(const std::string &sql) {
  PgQueryParseResult r = pg_query_parse(sql.c_str());
  std::string err = r.error ? std::string(r.error->message) : "";
  pg_query_free_parse_result(r);
  return err;
}
