/* Coordination from C (SPEC S1-S3, S6): sessions, fair mutexes with fencing tokens, fence
 * gates, record locks and keep-alives, with threads contending, cancellation from another
 * thread and misuse. Blocking is synchronised through watches, never through sleeps. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"


/* Waits until a put or delete event arrives on `w` (a contender's key appeared or went). */
static void await_event(tenure_watcher *w, tenure_event_kind kind) {
    tenure_event *ev = NULL;
    CHECK_OK(tenure_watcher_next(w, WAIT_MS, &ev));
    CHECK_EQ(tenure_event_type(ev), kind);
    tenure_event_free(ev);
}

static size_t count_prefix(tenure *db, const char *prefix) {
    tenure_kv_list *l = NULL;
    CHECK_OK(tenure_range(db, S(prefix), 0, &l));
    size_t n = tenure_kv_list_len(l);
    tenure_kv_list_free(l);
    return n;
}

/* ---- S1 ---------------------------------------------------------------------------------- */

static void s1_session_holds_a_lease_closes_resumes_and_reports_its_loss(void) {
    tenure *db = open_memory(NULL);
    tenure_session *s = NULL;
    s = new_session(db);
    int64_t lease = tenure_session_lease(s);
    CHECK(lease > 0);
    CHECK(!tenure_session_done(s));
    CHECK_RC(tenure_session_wait_done(s, 0), TENURE_ERR_TIMEOUT);
    tenure_lease_info *info = NULL;
    CHECK_OK(tenure_lease_time_to_live(db, lease, &info));
    CHECK_EQ(tenure_lease_info_ttl_ms(info), 60000);
    tenure_lease_info_free(info);

    /* Orphan + free keeps the lease; resume takes it over; close revokes it. */
    CHECK_OK(tenure_session_orphan(s));
    tenure_session_free(s);
    CHECK_OK(tenure_lease_time_to_live(db, lease, &info));
    tenure_lease_info_free(info);
    s = NULL;
    CHECK_OK(tenure_session_resume(db, lease, &s));
    CHECK_EQ(tenure_session_lease(s), lease);
    CHECK_OK(tenure_session_close(s));
    CHECK(tenure_session_done(s));
    CHECK_OK(tenure_session_wait_done(s, -1));
    CHECK_RC(tenure_lease_time_to_live(db, lease, &info), TENURE_ERR_LEASE_NOT_FOUND);
    CHECK_OK(tenure_session_close(s)); /* twice is fine */
    tenure_session_free(s);

    /* A lease revoked behind the session's back: done, and wait_done returns. */
    s = new_session(db);
    CHECK_OK(tenure_lease_revoke(db, tenure_session_lease(s)));
    CHECK_OK(tenure_session_wait_done(s, WAIT_MS));
    CHECK(tenure_session_done(s));
    tenure_session_free(s);

    tenure_session *none = (tenure_session *)1;
    CHECK_RC(tenure_session_resume(db, 987654, &none), TENURE_ERR_LEASE_NOT_FOUND);
    CHECK(none == (tenure_session *)1);
    tenure_close(db);
}

static void s1_session_renews_its_lease_past_its_ttl(void) {
    tenure *db = open_memory(NULL);
    tenure_session *s = NULL;
    /* Renewed every 1 s: a renewal may run 2 s late (valgrind, a loaded CI machine). */
    CHECK_OK(tenure_session_new(db, 3000, &s));
    /* Real time: one and a half TTLs pass and the lease is still there. */
    CHECK_RC(tenure_session_wait_done(s, 4500), TENURE_ERR_TIMEOUT);
    CHECK(!tenure_session_done(s));
    tenure_lease_info *info = NULL;
    CHECK_OK(tenure_lease_time_to_live(db, tenure_session_lease(s), &info));
    tenure_lease_info_free(info);
    end_session(s);
    tenure_close(db);
}

static int64_t remaining_ms(tenure *db, int64_t lease) {
    tenure_lease_info *info = NULL;
    CHECK_OK(tenure_lease_time_to_live(db, lease, &info));
    int64_t r = tenure_lease_info_remaining_ms(info);
    tenure_lease_info_free(info);
    return r;
}

/* Polls (bounded, 10 s) until the lease was renewed to its full TTL of `ttl_ms`. */
static int renewed_to(tenure *db, int64_t lease, int64_t ttl_ms) {
    for (int i = 0; i < 1000; i++) {
        if (remaining_ms(db, lease) == ttl_ms) return 1;
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    return 0;
}

static void s1_session_options_set_the_keepalive_interval(void) {
    tenure_clock *clock = NULL;
    CHECK_OK(tenure_clock_manual_new(&clock));
    tenure *db = open_memory(clock);
    tenure_session_options o;
    CHECK_RC(tenure_session_options_init(NULL), TENURE_ERR_NULL_POINTER);
    CHECK_OK(tenure_session_options_init(&o));
    CHECK_EQ(o.ttl_ms, 60000);
    CHECK_EQ(o.keepalive_interval_ms, 0); /* a third of the TTL */

    /* Renewed every 1000 ms of a 6000 ms TTL: one renewal after 1 s (the default interval,
     * 2000 ms, would leave 5000 ms). Time is the manual clock's. */
    o.ttl_ms = 6000;
    o.keepalive_interval_ms = 1000;
    tenure_session *s = NULL;
    CHECK_OK(tenure_session_new_with(db, &o, &s));
    int64_t lease = tenure_session_lease(s);
    CHECK_EQ(remaining_ms(db, lease), 6000);
    for (int round = 0; round < 3; round++) {
        CHECK_OK(tenure_clock_advance(clock, 1000));
        CHECK(renewed_to(db, lease, 6000));
    }
    CHECK(!tenure_session_done(s));

    /* Resumed with its own interval; `ttl_ms` is ignored on resume (the lease keeps 6000). */
    CHECK_OK(tenure_session_orphan(s));
    tenure_session_free(s);
    o.ttl_ms = 0;
    o.keepalive_interval_ms = 500;
    s = NULL;
    CHECK_OK(tenure_session_resume_with(db, lease, &o, &s));
    CHECK_OK(tenure_clock_advance(clock, 500));
    CHECK(renewed_to(db, lease, 6000));
    end_session(s);

    /* NULL options are the defaults. */
    s = NULL;
    CHECK_OK(tenure_session_new_with(db, NULL, &s));
    tenure_lease_info *info = NULL;
    CHECK_OK(tenure_lease_time_to_live(db, tenure_session_lease(s), &info));
    CHECK_EQ(tenure_lease_info_ttl_ms(info), 60000);
    tenure_lease_info_free(info);
    end_session(s);

    /* Bounds are the core's: refused before anything is granted, `*out` untouched. */
    tenure_session *none = (tenure_session *)1;
    CHECK_OK(tenure_session_options_init(&o));
    o.keepalive_interval_ms = -1;
    CHECK_RC(tenure_session_new_with(db, &o, &none), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("keepalive_interval_ms");
    CHECK_RC(tenure_session_resume_with(db, lease, &o, &none), TENURE_ERR_INVALID_ARGUMENT);
    /* S1: above the bound (9 000 000 000 s), named with the bound. */
    o.keepalive_interval_ms = INT64_C(9000000000001);
    CHECK_RC(tenure_session_new_with(db, &o, &none), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("keepalive_interval");
    CHECK_MSG("9000000000 s");
    CHECK_RC(tenure_session_resume_with(db, lease, &o, &none), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("9000000000 s");
    o.keepalive_interval_ms = 0;
    o.ttl_ms = 0;
    CHECK_RC(tenure_session_new_with(db, &o, &none), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_session_new_with(NULL, &o, &none), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_session_new_with(db, NULL, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_session_resume_with(NULL, lease, NULL, &none), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_session_resume_with(db, 987654, NULL, &none), TENURE_ERR_LEASE_NOT_FOUND);
    CHECK(none == (tenure_session *)1);
    tenure_lease_list *all = NULL;
    CHECK_OK(tenure_leases(db, &all));
    CHECK_EQ(tenure_lease_list_len(all), 0); /* the refused sessions left no lease */
    tenure_lease_list_free(all);
    tenure_close(db);
    tenure_clock_free(clock);
}

static void s1_misuse_nulls_bad_arguments(void) {
    tenure *db = open_memory(NULL);
    tenure_session *s = (tenure_session *)1;
    CHECK_RC(tenure_session_new(NULL, 1000, &s), TENURE_ERR_NULL_POINTER);
    CHECK_MSG("`db`");
    CHECK_RC(tenure_session_new(db, 1000, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_session_new(db, 0, &s), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_session_new(db, -5, &s), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_session_resume(NULL, 1, &s), TENURE_ERR_NULL_POINTER);
    CHECK(s == (tenure_session *)1);
    CHECK_RC(tenure_session_close(NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_session_cancel(NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_session_orphan(NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_session_wait_done(NULL, 0), TENURE_ERR_NULL_POINTER);
    CHECK_EQ(tenure_session_lease(NULL), 0);
    CHECK(!tenure_session_done(NULL));
    tenure_session_free(NULL);

    s = NULL;
    s = new_session(db);
    CHECK_RC(tenure_session_wait_done(s, -2), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("timeout_ms");
    tenure_lock *l = (tenure_lock *)1;
    CHECK_RC(tenure_mutex_lock(NULL, "m", 0, &l), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_mutex_lock(s, NULL, 0, &l), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_mutex_lock(s, "m", 0, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_mutex_lock(s, "m", -7, &l), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_mutex_lock(s, "\xff", 0, &l), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_mutex_try_lock(NULL, "m", &l), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_mutex_try_lock(s, NULL, &l), TENURE_ERR_NULL_POINTER);
    CHECK(l == (tenure_lock *)1);
    CHECK_RC(tenure_lock_unlock(NULL), TENURE_ERR_NULL_POINTER);
    CHECK_EQ(tenure_lock_fencing_token(NULL), 0);
    CHECK(!tenure_lock_is_held(NULL));
    tenure_lock_free(NULL);
    /* Nothing was left behind by the refused calls. */
    CHECK_EQ(count_prefix(db, "m/"), 0);
    end_session(s);
    tenure_close(db);
}

/* ---- S2, S3 ------------------------------------------------------------------------------ */

#define CONTENDERS 4

struct contender {
    tenure *db;
    int n;
    atomic_int *next; /* acquisition order */
    int order;
    int64_t token;
    tenure_result rc;
};

static void *contend(void *arg) {
    struct contender *c = arg;
    tenure_session *s = NULL;
    s = new_session(c->db);
    tenure_lock *l = NULL;
    c->rc = tenure_mutex_lock(s, "fifo", -1, &l);
    if (c->rc == TENURE_OK) {
        c->order = atomic_fetch_add(c->next, 1);
        c->token = tenure_lock_fencing_token(l);
        CHECK(tenure_lock_is_held(l));
        CHECK_OK(tenure_lock_unlock(l));
    }
    tenure_lock_free(l);
    end_session(s);
    return NULL;
}

static void s2_s3_waiters_acquire_in_fifo_order_with_increasing_tokens(void) {
    tenure *db = open_memory(NULL);
    tenure_session *holder = NULL;
    tenure_lock *first = NULL;
    holder = new_session(db);
    CHECK_OK(tenure_mutex_lock(holder, "fifo", 0, &first));
    int64_t t0 = tenure_lock_fencing_token(first);
    CHECK(t0 > 0);

    tenure_watcher *w = NULL;
    CHECK_OK(tenure_watch(db, S("fifo/"), TENURE_WATCH_PREFIX, 0, &w));
    atomic_int next = 0;
    pthread_t t[CONTENDERS];
    struct contender c[CONTENDERS];
    for (int i = 0; i < CONTENDERS; i++) {
        c[i] = (struct contender){.db = db, .n = i, .next = &next, .order = -1, .rc = -1};
        CHECK(pthread_create(&t[i], NULL, contend, &c[i]) == 0);
        await_event(w, TENURE_EVENT_PUT); /* contender i is queued before i + 1 starts */
    }
    CHECK_EQ(count_prefix(db, "fifo/"), CONTENDERS + 1);
    CHECK_OK(tenure_lock_unlock(first));
    for (int i = 0; i < CONTENDERS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    for (int i = 0; i < CONTENDERS; i++) {
        CHECK_RC(c[i].rc, TENURE_OK);
        CHECK_EQ(c[i].order, i);
        CHECK(c[i].token > (i == 0 ? t0 : c[i - 1].token));
    }
    /* The token outlives the unlock; a second unlock is refused. */
    CHECK_EQ(tenure_lock_fencing_token(first), t0);
    CHECK(!tenure_lock_is_held(first));
    CHECK_RC(tenure_lock_unlock(first), TENURE_ERR_NOT_LEADER);
    CHECK_MSG("not the leader");
    tenure_lock_free(first);
    tenure_watcher_free(w);
    end_session(holder);
    tenure_close(db);
}

static void s2_s3_try_lock_timeouts_nesting_and_the_fence_gate(void) {
    tenure *db = open_memory(NULL);
    tenure_session *a = NULL, *b = NULL;
    a = new_session(db);
    b = new_session(db);
    tenure_lock *la = NULL, *lb = (tenure_lock *)1, *nested = NULL;
    CHECK_OK(tenure_mutex_try_lock(a, "jobs", &la));
    CHECK_RC(tenure_mutex_try_lock(b, "jobs", &lb), TENURE_ERR_LOCKED);
    CHECK_RC(tenure_mutex_lock(b, "jobs", 0, &lb), TENURE_ERR_TIMEOUT);
    CHECK_RC(tenure_mutex_lock(b, "jobs", 50, &lb), TENURE_ERR_TIMEOUT);
    CHECK(lb == (tenure_lock *)1);
    CHECK_EQ(count_prefix(db, "jobs/"), 1); /* the timed-out claims were withdrawn */
    /* One acquisition per (session, mutex). */
    CHECK_RC(tenure_mutex_try_lock(a, "jobs", &lb), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("already holds");
    /* Names nest without interfering. */
    CHECK_OK(tenure_mutex_try_lock(b, "jobs/nightly", &nested));
    CHECK(tenure_lock_is_held(nested));

    int64_t ta = tenure_lock_fencing_token(la);
    CHECK_OK(tenure_lock_unlock(la));
    lb = NULL;
    CHECK_OK(tenure_mutex_lock(b, "jobs", WAIT_MS, &lb));
    int64_t tb = tenure_lock_fencing_token(lb);
    CHECK(tb > ta);

    tenure_fence_gate *g = NULL;
    CHECK_OK(tenure_fence_gate_new(&g));
    CHECK_EQ(tenure_fence_gate_highest(g), 0);
    CHECK_OK(tenure_fence_gate_admit(g, tb));
    CHECK_OK(tenure_fence_gate_admit(g, tb)); /* the same holder writes again */
    CHECK_RC(tenure_fence_gate_admit(g, ta), TENURE_ERR_STALE_TOKEN);
    CHECK_MSG("stale fencing token");
    CHECK_EQ(tenure_fence_gate_highest(g), tb);
    CHECK_RC(tenure_fence_gate_admit(NULL, 1), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_fence_gate_new(NULL), TENURE_ERR_NULL_POINTER);
    CHECK_EQ(tenure_fence_gate_highest(NULL), 0);
    tenure_fence_gate_free(g);
    tenure_fence_gate_free(NULL);

    /* Freeing a held lock unlocks it. */
    tenure_lock_free(lb);
    CHECK_EQ(count_prefix(db, "jobs/"), 1); /* only jobs/nightly/<lease> is left */
    tenure_lock_free(la);
    tenure_lock_free(nested);
    CHECK_OK(tenure_session_close(a));
    CHECK_OK(tenure_session_close(b));
    tenure_session_free(a);
    tenure_session_free(b);
    tenure_close(db);
}

struct waiter {
    tenure_session *s;
    const char *name;
    tenure_result rc;
};

static void *wait_lock(void *arg) {
    struct waiter *w = arg;
    tenure_lock *l = NULL;
    w->rc = tenure_mutex_lock(w->s, w->name, -1, &l);
    tenure_lock_free(l);
    return NULL;
}

/* Starts a thread blocked in tenure_mutex_lock(s, name, -1) and returns once it is queued. */
static void start_waiter(pthread_t *t, struct waiter *w, tenure *db, tenure_session *s,
                         const char *name) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s/", name);
    tenure_watcher *watch = NULL;
    CHECK_OK(tenure_watch(db, S(prefix), TENURE_WATCH_PREFIX, 0, &watch));
    *w = (struct waiter){.s = s, .name = name, .rc = -1};
    CHECK(pthread_create(t, NULL, wait_lock, w) == 0);
    await_event(watch, TENURE_EVENT_PUT);
    tenure_watcher_free(watch);
}

static void s2_a_waiter_whose_session_dies_stops_with_session_expired(void) {
    tenure *db = open_memory(NULL);
    tenure_session *holder = NULL, *s1 = NULL, *s2 = NULL;
    tenure_lock *l = NULL;
    holder = new_session(db);
    s1 = new_session(db);
    s2 = new_session(db);
    CHECK_OK(tenure_mutex_lock(holder, "m", 0, &l));

    /* Its lease revoked by someone else. */
    pthread_t t;
    struct waiter w;
    start_waiter(&t, &w, db, s1, "m");
    CHECK_OK(tenure_lease_revoke(db, tenure_session_lease(s1)));
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_RC(w.rc, TENURE_ERR_SESSION_EXPIRED);

    /* Its session closed from another thread. */
    start_waiter(&t, &w, db, s2, "m");
    CHECK_OK(tenure_session_close(s2));
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_RC(w.rc, TENURE_ERR_SESSION_EXPIRED);

    /* The holder kept the lock throughout; the dead waiters left nothing behind. */
    CHECK(tenure_lock_is_held(l));
    CHECK_EQ(count_prefix(db, "m/"), 1);
    tenure_lock_free(l);
    end_session(holder);
    tenure_session_free(s1);
    tenure_session_free(s2);
    tenure_close(db);
}

static void s2_cancel_from_another_thread_interrupts_a_lock_wait(void) {
    tenure *db = open_memory(NULL);
    tenure_session *holder = NULL, *s = NULL;
    tenure_lock *l = NULL, *l2 = (tenure_lock *)1;
    holder = new_session(db);
    s = new_session(db);
    CHECK_OK(tenure_mutex_lock(holder, "m", 0, &l));

    pthread_t t;
    struct waiter w;
    start_waiter(&t, &w, db, s, "m");
    CHECK_OK(tenure_session_cancel(s));
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_RC(w.rc, TENURE_ERR_TIMEOUT);
    CHECK_EQ(count_prefix(db, "m/"), 1); /* its claim was withdrawn */
    /* Sticky for blocking calls; the session itself lives on. */
    CHECK(!tenure_session_done(s));
    CHECK_RC(tenure_mutex_lock(s, "m", -1, &l2), TENURE_ERR_TIMEOUT);
    CHECK_RC(tenure_session_wait_done(s, -1), TENURE_ERR_TIMEOUT);
    CHECK_RC(tenure_mutex_try_lock(s, "m", &l2), TENURE_ERR_LOCKED);
    CHECK(l2 == (tenure_lock *)1);
    CHECK_OK(tenure_lock_unlock(l));
    l2 = NULL;
    CHECK_OK(tenure_mutex_try_lock(s, "m", &l2));
    tenure_lock_free(l2);
    tenure_lock_free(l);
    CHECK_OK(tenure_session_close(s));
    CHECK_OK(tenure_session_close(holder));
    tenure_session_free(s);
    tenure_session_free(holder);
    tenure_close(db);
}

static void s2_closing_the_engine_ends_waits_and_later_calls_fail_closed(void) {
    tenure *db = open_memory(NULL), *other = NULL;
    CHECK_OK(tenure_clone(db, &other));
    tenure_session *holder = NULL, *s = NULL;
    tenure_lock *l = NULL;
    holder = new_session(db);
    s = new_session(db);
    CHECK_OK(tenure_mutex_lock(holder, "m", 0, &l));
    pthread_t t;
    struct waiter w;
    start_waiter(&t, &w, db, s, "m");
    tenure_close(db);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_RC(w.rc, TENURE_ERR_CLOSED);

    /* Use after close: clear errors, no crash. */
    tenure_lock *l2 = (tenure_lock *)1;
    tenure_session *s2 = (tenure_session *)1;
    CHECK_RC(tenure_session_new(other, 60000, &s2), TENURE_ERR_CLOSED);
    CHECK(s2 == (tenure_session *)1);
    CHECK_RC(tenure_mutex_lock(s, "m2", 1000, &l2), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_mutex_try_lock(s, "m2", &l2), TENURE_ERR_CLOSED);
    CHECK(l2 == (tenure_lock *)1);
    CHECK_RC(tenure_lock_unlock(l), TENURE_ERR_CLOSED);
    CHECK(tenure_session_done(s));
    CHECK_RC(tenure_session_close(s), TENURE_ERR_CLOSED);
    int64_t token = 0;
    CHECK_RC(tenure_record_lock_try_acquire(other, S("r"), S("me"), 1000, &token),
             TENURE_ERR_CLOSED);
    tenure_keep_alive *ka = (tenure_keep_alive *)1;
    CHECK_RC(tenure_keep_alive_start(other, 1, &ka), TENURE_ERR_CLOSED);
    CHECK(ka == (tenure_keep_alive *)1);
    tenure_lock_free(l);
    tenure_session_free(s);
    tenure_session_free(holder);
    tenure_free(other);
}

/* ---- S6 ---------------------------------------------------------------------------------- */

struct grabber {
    tenure *db;
    char owner[16];
    tenure_result rc;
    int64_t token;
};

static void *grab(void *arg) {
    struct grabber *g = arg;
    g->rc = tenure_record_lock_try_acquire(g->db, S("job"), S(g->owner), 60000, &g->token);
    return NULL;
}

static void s6_record_locks_admit_one_owner_at_a_time(void) {
    tenure *db = open_memory(NULL);
    pthread_t t[CONTENDERS];
    struct grabber g[CONTENDERS];
    for (int i = 0; i < CONTENDERS; i++) {
        g[i] = (struct grabber){.db = db, .rc = -1, .token = 0};
        snprintf(g[i].owner, sizeof g[i].owner, "w%d", i % 10);
        CHECK(pthread_create(&t[i], NULL, grab, &g[i]) == 0);
    }
    int winners = 0, winner = -1;
    for (int i = 0; i < CONTENDERS; i++) {
        CHECK(pthread_join(t[i], NULL) == 0);
        if (g[i].rc == TENURE_OK) {
            winners++;
            winner = i;
        } else {
            CHECK_RC(g[i].rc, TENURE_ERR_LOCKED);
        }
    }
    CHECK_EQ(winners, 1);
    if (winner < 0) winner = 0;
    const char *owner = g[winner].owner, *other = g[(winner + 1) % CONTENDERS].owner;
    int64_t token = 0;
    CHECK_RC(tenure_record_lock_try_acquire(db, S("job"), S(owner), 1000, &token),
             TENURE_ERR_LOCKED);
    CHECK_RC(tenure_record_lock_refresh(db, S("job"), S(other)), TENURE_ERR_NOT_LEADER);
    CHECK_OK(tenure_record_lock_refresh(db, S("job"), S(owner)));
    CHECK_RC(tenure_record_lock_release(db, S("job"), S(other)), TENURE_ERR_NOT_LEADER);
    CHECK_OK(tenure_record_lock_release(db, S("job"), S(owner)));
    CHECK_RC(tenure_record_lock_release(db, S("job"), S(owner)), TENURE_ERR_NOT_LEADER);
    CHECK_RC(tenure_record_lock_refresh(db, S("job"), S(owner)), TENURE_ERR_NOT_LEADER);
    CHECK_OK(tenure_record_lock_try_acquire(db, S("job"), S(other), 60000, &token));
    CHECK(token > g[winner].token);

    CHECK_RC(tenure_record_lock_try_acquire(db, S(""), S("x"), 1000, &token),
             TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_record_lock_try_acquire(db, S("k"), S("x"), 0, &token),
             TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_record_lock_try_acquire(db, S("k"), S("x"), 1000, NULL),
             TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_record_lock_try_acquire(NULL, S("k"), S("x"), 1000, &token),
             TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_record_lock_refresh(db, NULL, 1, S("x")), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_record_lock_release(db, S("k"), NULL, 1), TENURE_ERR_NULL_POINTER);
    tenure_close(db);
}

/* ---- keep-alive -------------------------------------------------------------------------- */

static void keep_alive_renews_until_freed_and_reports_a_lost_lease(void) {
    tenure *db = open_memory(NULL);
    int64_t id = 0;
    CHECK_OK(tenure_lease_grant(db, 3000, 0, &id)); /* renewed every 1 s: 2 s of slack */
    tenure_keep_alive *ka = NULL;
    CHECK_OK(tenure_keep_alive_start(db, id, &ka));
    CHECK(tenure_keep_alive_is_alive(ka));
    CHECK_OK(tenure_keep_alive_error(ka));
    /* Real time: nothing expires over one and a half TTLs. */
    tenure_expired *e = NULL;
    CHECK_RC(tenure_expired_next(db, 4500, &e), TENURE_ERR_TIMEOUT);
    tenure_keep_alive_free(ka);
    CHECK_OK(tenure_expired_next(db, WAIT_MS, &e)); /* freed: the lease runs out */
    CHECK_EQ(tenure_expired_id(e, 0), id);
    tenure_expired_free(e);

    /* A renew that finds the lease gone ends it, with the reason. */
    CHECK_OK(tenure_lease_grant(db, 300, 0, &id));
    CHECK_OK(tenure_keep_alive_start(db, id, &ka));
    CHECK_OK(tenure_lease_revoke(db, id));
    for (int i = 0; i < WAIT_MS / 10 && tenure_keep_alive_is_alive(ka); i++)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL); /* bounded poll */
    CHECK(!tenure_keep_alive_is_alive(ka));
    CHECK_RC(tenure_keep_alive_error(ka), TENURE_ERR_LEASE_NOT_FOUND);
    CHECK_MSG("not found");
    tenure_keep_alive_free(ka);

    ka = (tenure_keep_alive *)1;
    CHECK_RC(tenure_keep_alive_start(db, 424242, &ka), TENURE_ERR_LEASE_NOT_FOUND);
    CHECK_RC(tenure_keep_alive_start(db, id, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_keep_alive_start(NULL, id, &ka), TENURE_ERR_NULL_POINTER);
    CHECK(ka == (tenure_keep_alive *)1);
    CHECK_RC(tenure_keep_alive_error(NULL), TENURE_ERR_NULL_POINTER);
    CHECK(!tenure_keep_alive_is_alive(NULL));
    tenure_keep_alive_free(NULL);
    tenure_close(db);
}

/* ---- S7 ---------------------------------------------------------------------------------- */

static void s7_semaphore_admits_its_permits_fifo_and_a_closed_holder_frees_one(void) {
    tenure *db = open_memory(NULL);
    tenure_session *a = new_session(db), *b = new_session(db), *c = new_session(db);
    tenure_permit *pa = NULL, *pb = NULL, *pc = NULL, *none = (tenure_permit *)1;
    CHECK_OK(tenure_semaphore_acquire(a, "pool", 2, WAIT_MS, &pa));
    CHECK_OK(tenure_semaphore_try_acquire(b, "pool", 2, &pb));
    CHECK(tenure_permit_is_held(pa) && tenure_permit_is_held(pb));
    CHECK(tenure_permit_fencing_token(pb) > tenure_permit_fencing_token(pa));
    CHECK_RC(tenure_semaphore_try_acquire(c, "pool", 2, &none), TENURE_ERR_LOCKED);
    CHECK(none == (tenure_permit *)1);
    CHECK_RC(tenure_semaphore_acquire(c, "pool", 3, 0, &none), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_semaphore_acquire(c, "pool", 0, 0, &none), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_semaphore_acquire(c, "pool", 2, 50, &none), TENURE_ERR_TIMEOUT);
    CHECK_EQ(count_prefix(db, "pool/"), 2);
    /* a's session ends without releasing: its permit is free. */
    CHECK_OK(tenure_session_close(a));
    CHECK(!tenure_permit_is_held(pa));
    CHECK_RC(tenure_permit_release(pa), TENURE_ERR_NOT_LEADER);
    CHECK_OK(tenure_semaphore_acquire(c, "pool", 2, WAIT_MS, &pc));
    CHECK(tenure_permit_fencing_token(pc) > tenure_permit_fencing_token(pb));
    CHECK_OK(tenure_permit_release(pb));
    CHECK(!tenure_permit_is_held(pb));
    CHECK_EQ(tenure_permit_fencing_token(NULL), 0);
    CHECK(!tenure_permit_is_held(NULL));
    CHECK_RC(tenure_permit_release(NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_semaphore_try_acquire(c, NULL, 2, &none), TENURE_ERR_NULL_POINTER);
    tenure_permit_free(NULL);
    tenure_permit_free(pa);
    tenure_permit_free(pb);
    tenure_permit_free(pc); /* releases */
    CHECK_EQ(count_prefix(db, "pool/"), 0);
    tenure_session_free(a);
    tenure_session_free(b);
    tenure_session_free(c);
    tenure_close(db);
}

/* ---- S8 ---------------------------------------------------------------------------------- */

static void s8_readers_share_a_writer_waits_and_a_closed_reader_frees_it(void) {
    tenure *db = open_memory(NULL);
    tenure_session *a = new_session(db), *b = new_session(db), *c = new_session(db);
    tenure_rwhold *ra = NULL, *rb = NULL, *w = NULL, *none = (tenure_rwhold *)1;
    CHECK_OK(tenure_rwlock_lock(a, "cfg", false, WAIT_MS, &ra));
    CHECK_OK(tenure_rwlock_try_lock(b, "cfg", false, &rb));
    CHECK(!tenure_rwhold_is_write(ra) && tenure_rwhold_is_held(rb));
    CHECK(tenure_rwhold_fencing_token(rb) > tenure_rwhold_fencing_token(ra));
    CHECK_RC(tenure_rwlock_try_lock(c, "cfg", true, &none), TENURE_ERR_LOCKED);
    CHECK_RC(tenure_rwlock_lock(c, "cfg", true, 50, &none), TENURE_ERR_TIMEOUT);
    CHECK(none == (tenure_rwhold *)1);
    CHECK_EQ(count_prefix(db, "cfg/"), 2);
    CHECK_OK(tenure_rwhold_release(rb));
    CHECK_RC(tenure_rwhold_release(rb), TENURE_ERR_NOT_LEADER);
    /* The last reader's session ends without releasing: the writer gets in. */
    CHECK_OK(tenure_session_close(a));
    CHECK(!tenure_rwhold_is_held(ra));
    CHECK_OK(tenure_rwlock_lock(c, "cfg", true, WAIT_MS, &w));
    CHECK(tenure_rwhold_is_write(w) && tenure_rwhold_is_held(w));
    CHECK_EQ(tenure_rwhold_fencing_token(NULL), 0);
    CHECK(!tenure_rwhold_is_write(NULL) && !tenure_rwhold_is_held(NULL));
    CHECK_RC(tenure_rwhold_release(NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_rwlock_try_lock(c, NULL, false, &none), TENURE_ERR_NULL_POINTER);
    tenure_rwhold_free(NULL);
    tenure_rwhold_free(ra);
    tenure_rwhold_free(rb);
    tenure_rwhold_free(w); /* releases */
    CHECK_EQ(count_prefix(db, "cfg/"), 0);
    tenure_session_free(a);
    tenure_session_free(b);
    tenure_session_free(c);
    tenure_close(db);
}

/* ---- S9: bounded holds, on a manual clock ---------------------------------------------- */

struct bounded_waiter {
    tenure_session *s;
    struct tenure_mutex_options opts;
    tenure_result rc;
    atomic_bool over;
};

static void *wait_bounded(void *arg) {
    struct bounded_waiter *w = arg;
    tenure_lock *l = NULL;
    w->rc = tenure_mutex_lock_with(w->s, "m", -1, &w->opts, &l);
    tenure_lock_free(l);
    atomic_store(&w->over, true);
    return NULL;
}

/* Takes every event of `w` up to and including a delete. */
static void await_delete(tenure_watcher *w) {
    for (int i = 0; i < 16; i++) {
        tenure_event *ev = NULL;
        CHECK_OK(tenure_watcher_next(w, WAIT_MS, &ev));
        bool deleted = ev != NULL && tenure_event_type(ev) == TENURE_EVENT_DELETE;
        tenure_event_free(ev);
        if (deleted) return;
    }
    CHECK(!"a delete arrived");
}

static void s9_options_default_to_none_and_bad_values_are_invalid(void) {
    tenure *db = open_memory(NULL);
    tenure_session *s = new_session(db);
    struct tenure_mutex_options o;
    memset(&o, 0xff, sizeof o);
    CHECK_OK(tenure_mutex_options_init(&o));
    CHECK_EQ(o.lock_delay_ms, 0);
    CHECK_EQ(o.max_hold_ms, 0);
    CHECK_RC(tenure_mutex_options_init(NULL), TENURE_ERR_NULL_POINTER);
    tenure_lock *l = (tenure_lock *)1;
    o.lock_delay_ms = -1;
    CHECK_RC(tenure_mutex_lock_with(s, "m", 0, &o, &l), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("lock_delay");
    o.lock_delay_ms = 0;
    o.max_hold_ms = INT64_MAX;
    CHECK_RC(tenure_mutex_try_lock_with(s, "m", &o, &l), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("max_hold");
    CHECK(l == (tenure_lock *)1);
    CHECK_EQ(count_prefix(db, "m/"), 0);
    /* NULL options: the plain mutex. */
    CHECK_OK(tenure_mutex_try_lock_with(s, "m", NULL, &l));
    CHECK(tenure_lock_is_held(l));
    tenure_lock_free(l);
    CHECK_RC(tenure_mutex_lock_with(NULL, "m", 0, NULL, &l), TENURE_ERR_NULL_POINTER);
    end_session(s);
    tenure_close(db);
}

static void s9_max_hold_ends_a_hold_on_the_engine_clock(void) {
    tenure_clock *clock = NULL;
    CHECK_OK(tenure_clock_manual_new(&clock));
    tenure *db = open_memory(clock);
    tenure_session *a = new_session(db), *b = new_session(db);
    struct tenure_mutex_options o;
    CHECK_OK(tenure_mutex_options_init(&o));
    o.max_hold_ms = 10000;
    tenure_lock *la = NULL, *lb = NULL;
    CHECK_OK(tenure_mutex_lock_with(a, "m", 0, &o, &la));
    tenure_watcher *watch = NULL;
    CHECK_OK(tenure_watch(db, S("m/"), TENURE_WATCH_PREFIX, 0, &watch));
    CHECK_OK(tenure_clock_advance(clock, 9999));
    CHECK(tenure_lock_is_held(la));
    CHECK_OK(tenure_clock_advance(clock, 1));
    await_delete(watch);
    CHECK(!tenure_lock_is_held(la));
    CHECK(!tenure_session_done(a)); /* the hold ended, not the session */
    CHECK_OK(tenure_mutex_try_lock(b, "m", &lb));
    CHECK(tenure_lock_fencing_token(lb) > tenure_lock_fencing_token(la));
    CHECK_RC(tenure_lock_unlock(la), TENURE_ERR_NOT_LEADER);
    tenure_watcher_free(watch);
    tenure_lock_free(la);
    tenure_lock_free(lb);
    end_session(a);
    end_session(b);
    tenure_close(db);
    tenure_clock_free(clock);
}

static void s9_lock_delay_holds_back_the_next_holder_after_a_lost_session(void) {
    tenure_clock *clock = NULL;
    CHECK_OK(tenure_clock_manual_new(&clock));
    tenure *db = open_memory(clock);
    tenure_session *a = new_session(db), *b = new_session(db);
    tenure_lock *la = NULL;
    CHECK_OK(tenure_mutex_lock(a, "m", 0, &la));
    tenure_watcher *watch = NULL;
    CHECK_OK(tenure_watch(db, S("m/"), TENURE_WATCH_PREFIX, 0, &watch));
    struct bounded_waiter w = {.s = b, .rc = -1};
    atomic_init(&w.over, false);
    CHECK_OK(tenure_mutex_options_init(&w.opts));
    w.opts.lock_delay_ms = 5000;
    tenure_stats st;
    CHECK_OK(tenure_stats_read(db, &st));
    const uint64_t watchers = st.watchers;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, wait_bounded, &w) == 0);
    await_event(watch, TENURE_EVENT_PUT); /* b is queued */
    /* ...and has looked at the queue: it watches its own entry and a's (two more watchers).
     * An in-memory engine keeps no history, so an end before b's first look would not be
     * seen (SPEC S9). */
    for (long i = 0; i < 10000000 && st.watchers < watchers + 2; i++) {
        sched_yield();
        CHECK_OK(tenure_stats_read(db, &st));
    }
    CHECK(st.watchers >= watchers + 2);
    CHECK_OK(tenure_lease_revoke(db, tenure_session_lease(a))); /* a ends without unlocking */
    /* Time moves in 100 ms steps until b has the lock: never before 5 s have passed (b's
     * 60 s lease outlives the at most 30 s moved). */
    int64_t moved = 0;
    while (!atomic_load(&w.over) && moved < 30000) {
        for (int i = 0; i < 1000 && !atomic_load(&w.over); i++) sched_yield();
        if (atomic_load(&w.over)) break;
        CHECK_OK(tenure_clock_advance(clock, 100));
        moved += 100;
    }
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_OK(w.rc);
    CHECK(moved >= 5000);
    tenure_watcher_free(watch);
    tenure_lock_free(la);
    tenure_session_free(a);
    end_session(b);
    tenure_close(db);
    tenure_clock_free(clock);
}

void sync_tests(void) {
    RUN(s1_session_holds_a_lease_closes_resumes_and_reports_its_loss);
    RUN(s1_session_renews_its_lease_past_its_ttl);
    RUN(s1_session_options_set_the_keepalive_interval);
    RUN(s1_misuse_nulls_bad_arguments);
    RUN(s2_s3_waiters_acquire_in_fifo_order_with_increasing_tokens);
    RUN(s2_s3_try_lock_timeouts_nesting_and_the_fence_gate);
    RUN(s2_a_waiter_whose_session_dies_stops_with_session_expired);
    RUN(s2_cancel_from_another_thread_interrupts_a_lock_wait);
    RUN(s2_closing_the_engine_ends_waits_and_later_calls_fail_closed);
    RUN(s6_record_locks_admit_one_owner_at_a_time);
    RUN(keep_alive_renews_until_freed_and_reports_a_lost_lease);
    RUN(s7_semaphore_admits_its_permits_fifo_and_a_closed_holder_frees_one);
    RUN(s8_readers_share_a_writer_waits_and_a_closed_reader_frees_it);
    RUN(s9_options_default_to_none_and_bad_values_are_invalid);
    RUN(s9_max_hold_ends_a_hold_on_the_engine_clock);
    RUN(s9_lock_delay_holds_back_the_next_holder_after_a_lost_session);
}
