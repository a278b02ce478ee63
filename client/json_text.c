/* The client writes JSON as the service does (shortest round-trip reals): the same source,
 * server/util/json_text.c, compiled into the client. */
#include "util/json_text.c"
