/* JSON text with every real written in its shortest round-trip form.
 *
 * jansson writes a real with %.17g ("lr":0.00029999999999999997 for 0.0003); every JSON text the
 * service and the client write goes through json_text_dumps instead, which keeps jansson's layout
 * and rewrites each real as the first of %.15g, %.16g and %.17g that parses back to the same
 * double (a subnormal, whose digits are fewer, tries 1..17), in jansson's form: a real always
 * has a '.' or an exponent ("1.0", "1e-300"), the exponent without '+' or leading zeros.
 * Integers, strings and layout are left as they are. No HTTP, SQL or state: any thread. */
#ifndef ATTNLAB_JSON_TEXT_H
#define ATTNLAB_JSON_TEXT_H

#include <jansson.h>
#include <stddef.h>

/* The text of a finite double v as json_text_dumps writes it, into buf (cap >= 32 always
 * suffices); returns its length, or -1 when v is not finite or buf is too small. */
int json_text_real(double v, char *buf, size_t cap);

/* Rewrites, in place, every real of a JSON text jansson dumped at its default precision (a real
 * is a number token with '.', 'e' or 'E' outside strings) in its shortest form; the text only
 * shrinks. Returns text (NULL stays NULL). */
char *json_text_shorten(char *text);

/* json_dumps(v, flags) with every real in its shortest form (any JSON_REAL_PRECISION in flags is
 * ignored: the default, exact precision is what is shortened). Free with free(). NULL as
 * json_dumps (out of memory, or v not an array or object without JSON_ENCODE_ANY). */
char *json_text_dumps(const json_t *v, size_t flags);

#endif
