/* The schema as an ordered list of SQL migrations, generated at build time from db/migrations/.
 * Migration i (0-based) takes a database from PRAGMA user_version i to i+1. */
#ifndef ATTNLAB_STORE_MIGRATIONS_H
#define ATTNLAB_STORE_MIGRATIONS_H

typedef struct {
    const char *name;
    const char *sql;
} store_migration;

extern const store_migration store_migrations[];
extern const int store_migration_count;

#endif
