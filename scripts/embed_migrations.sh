#!/usr/bin/env bash
# Turns db/migrations/NNNN_name.sql files into a C array, in the order given (sorted by the Makefile).
# Migration N (1-based position) moves the database from user_version N-1 to N.
# MIGRATIONS_SYMBOL names the array (default store_migrations; the PostgreSQL ones are another).
set -euo pipefail
sym=${MIGRATIONS_SYMBOL:-store_migrations}
echo '/* Generated from db/migrations by scripts/embed_migrations.sh; do not edit. */'
echo '#include "store/store_migrations.h"'
[ "$sym" = store_migrations ] || { echo "extern const store_migration ${sym}[];"; echo "extern const int ${sym%s}_count;"; }
echo "const store_migration ${sym}[] = {"
for f in "$@"; do
  printf '    {"%s",\n' "$(basename "$f")"
  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/     "/' -e 's/$/\\n"/' "$f"
  echo '    },'
done
echo '};'
echo "const int ${sym%s}_count = $#;"
