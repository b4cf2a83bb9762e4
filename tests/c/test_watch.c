/* Watches through the C API (SPEC K6): events in revision order, prefixes, previous values,
 * replay from a start revision, compaction and a watcher that falls behind. */
#include <stdlib.h>

#include "check.h"


static tenure_event *next_event(tenure_watcher *w) {
    tenure_event *ev = NULL;
    CHECK_OK(tenure_watcher_next(w, WAIT_MS, &ev));
    return ev;
}

static void watch_key_sees_puts_and_deletes_in_order(void) {
    tenure *db = open_memory(NULL);
    tenure_watcher *w = NULL;
    CHECK_OK(tenure_watch(db, S("k"), 0, 0, &w));
    tenure_event *ev = (tenure_event *)1;
    CHECK_RC(tenure_watcher_next(w, 0, &ev), TENURE_ERR_TIMEOUT);
    CHECK_RC(tenure_watcher_next(w, 20, &ev), TENURE_ERR_TIMEOUT);
    CHECK(ev == (tenure_event *)1);

    CHECK_OK(tenure_put(db, S("k"), S("1"), 0, OUT_I64));
    CHECK_OK(tenure_put(db, S("other"), S("x"), 0, OUT_I64));
    CHECK_OK(tenure_put(db, S("k"), S("2"), 0, OUT_I64));
    CHECK_OK(tenure_delete(db, S("k"), OUT_BOOL));

    ev = next_event(w);
    CHECK_EQ(tenure_event_type(ev), TENURE_EVENT_PUT);
    CHECK_EQ(tenure_event_revision(ev), 1);
    CHECK(bytes_eq(tenure_kv_key(tenure_event_kv(ev)), "k"));
    CHECK(bytes_eq(tenure_kv_value(tenure_event_kv(ev)), "1"));
    CHECK(tenure_event_prev_kv(ev) == NULL); /* not asked for */
    tenure_event_free(ev);
    ev = next_event(w);
    CHECK_EQ(tenure_event_revision(ev), 3);
    CHECK_EQ(tenure_kv_version(tenure_event_kv(ev)), 2);
    tenure_event_free(ev);
    ev = next_event(w);
    CHECK_EQ(tenure_event_type(ev), TENURE_EVENT_DELETE);
    CHECK_EQ(tenure_event_revision(ev), 4);
    CHECK_EQ(tenure_kv_mod_revision(tenure_event_kv(ev)), 4);
    CHECK_EQ(tenure_kv_value(tenure_event_kv(ev)).len, 0);
    tenure_event_free(ev);
    CHECK_RC(tenure_watcher_next(w, 0, &ev), TENURE_ERR_TIMEOUT);

    tenure_stats s;
    CHECK_OK(tenure_stats_read(db, &s));
    CHECK_EQ(s.watchers, 1);
    tenure_watcher_free(w);
    tenure_close(db);
}

static void prefix_and_prev_kv_flags(void) {
    tenure *db = open_memory(NULL);
    tenure_watcher *w = NULL;
    CHECK_OK(tenure_put(db, S("svc/a"), S("old"), 0, OUT_I64));
    CHECK_OK(tenure_watch(db, S("svc/"), TENURE_WATCH_PREFIX | TENURE_WATCH_PREV_KV, 0, &w));
    CHECK_OK(tenure_put(db, S("svc/a"), S("new"), 0, OUT_I64));
    CHECK_OK(tenure_put(db, S("svx"), S("no"), 0, OUT_I64));
    CHECK_OK(tenure_put(db, S("svc/b"), S("b"), 0, OUT_I64));

    tenure_event *ev = next_event(w);
    CHECK(bytes_eq(tenure_kv_value(tenure_event_kv(ev)), "new"));
    const tenure_kv *prev = tenure_event_prev_kv(ev);
    CHECK(prev != NULL);
    CHECK(bytes_eq(tenure_kv_value(prev), "old"));
    CHECK_EQ(tenure_kv_mod_revision(prev), 1);
    tenure_event_free(ev);
    ev = next_event(w);
    CHECK(bytes_eq(tenure_kv_key(tenure_event_kv(ev)), "svc/b"));
    CHECK(tenure_event_prev_kv(ev) == NULL); /* the key did not exist */
    tenure_event_free(ev);
    CHECK_RC(tenure_watcher_next(w, 0, &ev), TENURE_ERR_TIMEOUT);
    tenure_watcher_free(w);

    CHECK_RC(tenure_watch(db, S("k"), 4, 0, &w), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("unknown watch flags 0x4");
    CHECK_RC(tenure_watch(db, S("k"), UINT32_MAX, 0, &w), TENURE_ERR_INVALID_ARGUMENT);
    tenure_close(db);
}

static void revoke_shows_one_delete_per_key_at_one_revision(void) {
    tenure *db = open_memory(NULL);
    int64_t lease = 0, rev = 0;
    CHECK_OK(tenure_lease_grant(db, 10000, 0, &lease));
    CHECK_OK(tenure_put(db, S("l/b"), S("2"), lease, OUT_I64));
    CHECK_OK(tenure_put(db, S("l/a"), S("1"), lease, OUT_I64));
    tenure_watcher *w = NULL;
    CHECK_OK(tenure_watch(db, S("l/"), TENURE_WATCH_PREFIX, 0, &w));
    CHECK_OK(tenure_lease_revoke(db, lease));
    CHECK_OK(tenure_revision(db, &rev));
    tenure_event *ev = next_event(w);
    CHECK_EQ(tenure_event_type(ev), TENURE_EVENT_DELETE);
    CHECK(bytes_eq(tenure_kv_key(tenure_event_kv(ev)), "l/a"));
    CHECK_EQ(tenure_event_revision(ev), rev);
    tenure_event_free(ev);
    ev = next_event(w);
    CHECK(bytes_eq(tenure_kv_key(tenure_event_kv(ev)), "l/b"));
    CHECK_EQ(tenure_event_revision(ev), rev);
    tenure_event_free(ev);
    tenure_watcher_free(w);
    tenure_close(db);
}

static void start_revision_replays_history_and_old_revisions_are_compacted(void) {
    tenure_options o;
    tenure *db = NULL;
    tenure_options_init(&o);
    o.watch_history = 3;
    CHECK_OK(tenure_open(NULL, &o, &db));
    for (int i = 0; i < 6; i++) CHECK_OK(tenure_put(db, S("h"), S("v"), 0, OUT_I64));
    /* Revisions 4..6 are retained. */
    tenure_watcher *w = NULL;
    CHECK_OK(tenure_watch(db, S("h"), 0, 5, &w));
    tenure_event *ev = next_event(w);
    CHECK_EQ(tenure_event_revision(ev), 5);
    tenure_event_free(ev);
    ev = next_event(w);
    CHECK_EQ(tenure_event_revision(ev), 6);
    tenure_event_free(ev);
    CHECK_RC(tenure_watcher_next(w, 0, &ev), TENURE_ERR_TIMEOUT);
    tenure_watcher_free(w);

    w = (tenure_watcher *)1;
    CHECK_RC(tenure_watch(db, S("h"), 0, 1, &w), TENURE_ERR_COMPACTED);
    CHECK_MSG("compacted");
    CHECK(w == (tenure_watcher *)1);
    CHECK_RC(tenure_watch(db, S("h"), 0, -1, &w), TENURE_ERR_INVALID_ARGUMENT);
    tenure_close(db);
}

static void a_watcher_that_falls_behind_is_cancelled_with_compacted(void) {
    tenure_options o;
    tenure *db = NULL;
    tenure_options_init(&o);
    o.watch_queue = 2;
    CHECK_OK(tenure_open(NULL, &o, &db));
    tenure_watcher *w = NULL;
    CHECK_OK(tenure_watch(db, S("q"), 0, 0, &w));
    for (int i = 0; i < 5; i++) CHECK_OK(tenure_put(db, S("q"), S("v"), 0, OUT_I64));
    tenure_event *ev = NULL;
    /* The queued events are delivered, then the cancellation. */
    CHECK_OK(tenure_watcher_next(w, WAIT_MS, &ev));
    tenure_event_free(ev);
    CHECK_OK(tenure_watcher_next(w, WAIT_MS, &ev));
    tenure_event_free(ev);
    ev = NULL;
    CHECK_RC(tenure_watcher_next(w, WAIT_MS, &ev), TENURE_ERR_COMPACTED);
    CHECK_MSG("fell");
    CHECK(ev == NULL);
    /* Afterwards the watcher is finished. */
    CHECK_RC(tenure_watcher_next(w, 0, &ev), TENURE_ERR_CLOSED);
    tenure_watcher_free(w);
    tenure_close(db);
}

static void huge_timeouts_return_as_soon_as_an_event_is_there(void) {
    tenure *db = open_memory(NULL);
    tenure_watcher *w = NULL;
    CHECK_OK(tenure_watch(db, S("t"), 0, 0, &w));
    CHECK_OK(tenure_put(db, S("t"), S("1"), 0, OUT_I64));
    CHECK_OK(tenure_put(db, S("t"), S("2"), 0, OUT_I64));
    tenure_event *ev = NULL;
    CHECK_OK(tenure_watcher_next(w, INT64_MAX, &ev));
    tenure_event_free(ev);
    CHECK_OK(tenure_watcher_next(w, -1, &ev));
    CHECK(bytes_eq(tenure_kv_value(tenure_event_kv(ev)), "2"));
    tenure_event_free(ev);
    tenure_watcher_free(w);
    tenure_close(db);
}

void watch_tests(void) {
    RUN(watch_key_sees_puts_and_deletes_in_order);
    RUN(prefix_and_prev_kv_flags);
    RUN(revoke_shows_one_delete_per_key_at_one_revision);
    RUN(start_revision_replays_history_and_old_revisions_are_compacted);
    RUN(a_watcher_that_falls_behind_is_cancelled_with_compacted);
    RUN(huge_timeouts_return_as_soon_as_an_event_is_there);
}
