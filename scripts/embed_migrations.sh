#!/usr/bin/env bash
# Turns db/migrations/NNNN_name.sql files into a C array, in the order given (sorted by the Makefile).
# Migration N (1-based position) moves the database from user_version N-1 to N.
set -euo pipefail
echo '/* Generated from db/migrations by scripts/embed_migrations.sh; do not edit. */'
echo '#include "store_migrations.h"'
echo 'const store_migration store_migrations[] = {'
for f in "$@"; do
  printf '    {"%s",\n' "$(basename "$f")"
  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/     "/' -e 's/$/\\n"/' "$f"
  echo '    },'
done
echo '};'
echo "const int store_migration_count = $#;"
