// The C++/PostgreSQL boundary helpers (see guard.h).
#include "ddx/pg/guard.h"

#include <cstring>
#include <string>

extern "C" {
#include "parser/parse_node.h"
}

namespace ddx::pg {

void ThrowPgError(ErrorData *edata) {
  const char *c = unpack_sql_state(edata->sqlerrcode);
  Error e(c, edata->message ? edata->message : "", edata->detail ? edata->detail : "", edata->hint ? edata->hint : "");
  FreeErrorData(edata);
  throw e;
}

namespace {
void Copy(char *dst, size_t n, const char *src) noexcept { snprintf(dst, n, "%s", src ? src : ""); }
}  // namespace

void PendingError::From(const Error &e) noexcept {
  set = true;
  Copy(code, sizeof code, e.code.size() == 5 ? e.code.c_str() : "XX000");
  Copy(message, sizeof message, e.message.c_str());
  Copy(detail, sizeof detail, e.detail.c_str());
  Copy(hint, sizeof hint, e.hint.c_str());
  position = e.position;
}

void PendingError::From(const char *c, const char *m) noexcept {
  set = true;
  Copy(code, sizeof code, c);
  snprintf(message, sizeof message, "ddx internal error: %s", m ? m : "");
  detail[0] = hint[0] = 0;
}

void PendingError::Raise(ParseState *pstate) const {
  int sqlerrcode = MAKE_SQLSTATE(code[0], code[1], code[2], code[3], code[4]);
  ereport(ERROR,
          (errcode(sqlerrcode), errmsg_internal("%s", message), detail[0] ? errdetail_internal("%s", detail) : 0,
           hint[0] ? errhint("%s", hint) : 0, (pstate && position >= 0) ? parser_errposition(pstate, position) : 0));
  pg_unreachable();
}

}  // namespace ddx::pg
