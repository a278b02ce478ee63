/* Presenter mode: a teacher's dashboard page that students' dashboards follow.
 *
 * The presenter asks for a short join code (and a token that only it gets); each time its page
 * changes it sends what it shows — the dashboard's hash, and the run and probe in it — and the
 * API broadcasts that as a `follow` event on /api/events; a follower that joins late reads the
 * last state. The codes live in this process's memory only (a restart forgets them; behind
 * several API nodes presenter and followers must use the same one), at most
 * SVC_FOLLOW_MAX_CODES at once, each expiring SVC_FOLLOW_TTL_S seconds after its last change.
 * Every function is safe from any thread. */
#ifndef ATTNLAB_SVC_FOLLOW_H
#define ATTNLAB_SVC_FOLLOW_H

#include <jansson.h>

#include "services/svc.h"

#define SVC_FOLLOW_MAX_CODES 64
#define SVC_FOLLOW_TTL_S (3 * 3600)
#define SVC_FOLLOW_CODE_LEN 6   /* letters and digits, none of 0 O 1 I */
#define SVC_FOLLOW_HASH_MAX 512 /* bytes of the page's hash */
#define SVC_FOLLOW_PROBE_MAX 64 /* bytes of a probe kind's name */

/* A new code: *out = {"code","token","seq":0,"hash":null,"run":null,"probe":null,"updated_at",
 * "expires_at"}. SVC_BUSY (retry_after: seconds until the oldest code expires) when
 * SVC_FOLLOW_MAX_CODES live codes exist; SVC_FAILED when no random bytes or memory. */
svc_status svc_follow_create(double now, json_t **out, svc_error *err);

/* The presenter's page: body {"hash": "#/…", "run": id or null, "probe": "kind" or null} (hash
 * required; 1..SVC_FOLLOW_HASH_MAX bytes of printable ASCII starting "#/", not a follow page; no
 * other members). The code's state becomes it, seq one more; *out is the new state (no token)
 * and *event the text of the `follow` event to publish (both caller's). SVC_NOT_FOUND for an
 * unknown or expired code, SVC_INVALID naming the field, SVC_CONFLICT with code "forbidden" when
 * token is not the code's. */
svc_status svc_follow_update(const char *code, const char *token, const json_t *body, double now, json_t **out,
                             char **event, svc_error *err);

/* The code's last state, as svc_follow_update gives it (no token). SVC_NOT_FOUND when unknown or
 * expired. */
svc_status svc_follow_get(const char *code, double now, json_t **out, svc_error *err);

/* Forgets every code (tests). */
void svc_follow_reset(void);

#endif
