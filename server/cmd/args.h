/* Command-line value parsing shared by the attnlabd subcommands. */
#ifndef ATTNLAB_ARGS_H
#define ATTNLAB_ARGS_H

/* Parses all of s as a base-10 integer in [lo, hi] into *out. Returns 0, or -1 (out untouched)
 * when s is empty, has trailing characters, overflows or is out of range. */
int args_long(const char *s, long lo, long hi, long *out);

#endif
