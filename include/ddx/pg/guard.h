// The C++/PostgreSQL boundary (STYLE.md, "The C++/PostgreSQL boundary").
//
//  - PgCall(f) runs one PostgreSQL call from C++: a PostgreSQL error inside it
//    is caught (sigsetjmp), copied, flushed and rethrown as ddx::Error with its
//    SQLSTATE, so it never longjmps over a C++ frame. f must not own C++
//    objects with destructors: it calls PostgreSQL and returns plain values.
//  - PendingError holds an error in fixed buffers (no allocation), so an entry
//    point can catch every C++ exception, let every destructor run, and only
//    then ereport.
//
// Include this after the C++ standard headers and the ddx core headers, and
// before any other PostgreSQL header.
#pragma once

#include <cstdio>
#include <exception>
#include <string>
#include <type_traits>

#include "ddx/core/ir.h"

extern "C" {
#include "postgres.h"

#include "utils/elog.h"
#include "utils/memutils.h"
}

struct ParseState;

namespace ddx::pg {

[[noreturn]] void ThrowPgError(ErrorData *edata);

// A C string PostgreSQL returned (perhaps NULL) as a C++ one.
inline std::string Str(const char *s) { return s ? std::string(s) : std::string(); }

template <typename F>
auto PgCall(F &&f) -> decltype(f()) {
  using R = decltype(f());
  MemoryContext cxt = CurrentMemoryContext;
  ErrorData *volatile edata = nullptr;
  if constexpr (std::is_void_v<R>) {
    PG_TRY();
    { f(); }
    PG_CATCH();
    {
      MemoryContextSwitchTo(cxt);
      edata = CopyErrorData();
      FlushErrorState();
    }
    PG_END_TRY();
    if (edata) ThrowPgError(edata);
  } else {
    R result{};
    R *volatile out = &result;  // written through memory: survives the longjmp
    PG_TRY();
    { *out = f(); }
    PG_CATCH();
    {
      MemoryContextSwitchTo(cxt);
      edata = CopyErrorData();
      FlushErrorState();
    }
    PG_END_TRY();
    if (edata) ThrowPgError(edata);
    return result;
  }
}

// An error waiting to be raised once the C++ frames are gone.
struct PendingError {
  bool set = false;
  char code[6] = {0};
  char message[1024] = {0};
  char detail[2048] = {0};
  char hint[1024] = {0};
  int position = -1;

  void From(const Error &e) noexcept;
  void From(const char *code, const char *message) noexcept;
  // ereport(ERROR) with these fields; position through pstate when given.
  [[noreturn]] void Raise(::ParseState *pstate) const;
};

// Runs body, catching every C++ exception into `err`. Use as:
//   PendingError err; Guard(err, [&] { ... }); if (err.set) err.Raise(...);
template <typename F>
void Guard(PendingError &err, F &&body) noexcept {
  try {
    body();
  } catch (const Error &e) {
    err.From(e);
  } catch (const std::exception &e) {
    err.From("XX000", e.what());
  } catch (...) {
    err.From("XX000", "unknown C++ exception");
  }
}

}  // namespace ddx::pg
