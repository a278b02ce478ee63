/* Whole files into memory, for the engine's readers of text, corpora and weights. */
#ifndef ENGINE_FILEIO_H
#define ENGINE_FILEIO_H

#include <stddef.h>

#include "error.h"

/* Reads the whole file at path into *buf (malloc'd, with a NUL after its *len bytes, so that text
 * can be read as a string). ENGINE_ERR_IO naming the file and the system's reason when it cannot be
 * opened or read, ENGINE_ERR_NOMEM when it does not fit; *buf is NULL then. */
engine_status file_read_all(const char *path, char **buf, size_t *len, engine_error *err);

#endif
