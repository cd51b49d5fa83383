// Guards the boundary: the core must never see a PostgreSQL header. postgres.h
// defines PG_VERSION_NUM (through pg_config.h); if it is visible here, a core
// file included PostgreSQL, and the build fails.
#pragma once
#ifdef PG_VERSION_NUM
#error "ddx core headers must not be included after PostgreSQL headers in core code"
#endif
