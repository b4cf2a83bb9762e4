/* Elections and the leader elector from C (SPEC S4, S5): campaigns in FIFO order with
 * increasing tokens, proclaim/resign, observers (and their cancellation from another thread),
 * the elector's config checks and its callbacks in order on one thread, driven by a manual
 * clock. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"


/* Waits until a key is put under the watched prefix (deletes before it are skipped). */
static void await_put(tenure_watcher *w) {
    tenure_event_kind kind = TENURE_EVENT_DELETE;
    while (kind == TENURE_EVENT_DELETE) {
        tenure_event *ev = NULL;
        tenure_result rc = tenure_watcher_next(w, WAIT_MS, &ev);
        CHECK_OK(rc);
        if (rc != TENURE_OK) return;
        kind = tenure_event_type(ev);
        tenure_event_free(ev);
    }
}

/* The next observed state is a leader with `value` (NULL: no leader). */
static void expect_observed(tenure_observer *o, const char *value) {
    tenure_kv *kv = (tenure_kv *)1;
    CHECK_OK(tenure_observer_next(o, WAIT_MS, &kv));
    if (value == NULL) {
        CHECK(kv == NULL);
    } else {
        CHECK(kv != NULL && kv != (tenure_kv *)1);
        if (kv != NULL && kv != (tenure_kv *)1) CHECK(bytes_eq(tenure_kv_value(kv), value));
    }
    if (kv != (tenure_kv *)1) tenure_kv_free(kv);
}

#define CANDIDATES 3

struct candidate {
    tenure *db;
    tenure_session *s;
    char value[16];
    tenure_leadership *l;
    tenure_result rc;
};

static void *campaign(void *arg) {
    struct candidate *c = arg;
    c->rc = tenure_election_campaign(c->s, "svc", S(c->value), -1, &c->l);
    return NULL;
}

static void s4_campaigns_win_in_order_and_observers_see_every_change(void) {
    tenure *db = open_memory(NULL);
    tenure_kv *kv = (tenure_kv *)1;
    CHECK_OK(tenure_election_leader(db, "svc", &kv));
    CHECK(kv == NULL);
    tenure_observer *o = NULL;
    CHECK_OK(tenure_election_observe(db, "svc", &o));
    expect_observed(o, NULL);

    tenure_watcher *w = NULL;
    CHECK_OK(tenure_watch(db, S("svc/"), TENURE_WATCH_PREFIX, 0, &w));
    pthread_t t[CANDIDATES];
    struct candidate c[CANDIDATES];
    for (int i = 0; i < CANDIDATES; i++) {
        c[i] = (struct candidate){.db = db, .l = NULL, .rc = -1};
        snprintf(c[i].value, sizeof c[i].value, "c%d", i % 10);
        c[i].s = new_session(db);
        CHECK(pthread_create(&t[i], NULL, campaign, &c[i]) == 0);
        await_put(w); /* candidate i is queued before i + 1 starts */
    }
    int64_t prev = 0;
    for (int i = 0; i < CANDIDATES; i++) {
        CHECK(pthread_join(t[i], NULL) == 0); /* only the head of the queue returns */
        CHECK_RC(c[i].rc, TENURE_OK);
        if (c[i].rc != TENURE_OK) continue;
        int64_t token = tenure_leadership_fencing_token(c[i].l);
        CHECK(token > prev);
        prev = token;
        CHECK(tenure_leadership_is_held(c[i].l));
        expect_observed(o, c[i].value);
        CHECK_OK(tenure_election_leader(db, "svc", &kv));
        CHECK(bytes_eq(tenure_kv_value(kv), c[i].value));
        CHECK_EQ(tenure_kv_create_revision(kv), token);
        tenure_bytes key = tenure_leadership_key(c[i].l);
        CHECK(key.len == tenure_kv_key(kv).len && memcmp(key.data, tenure_kv_key(kv).data, key.len) == 0);
        tenure_kv_free(kv);

        CHECK_OK(tenure_leadership_proclaim(c[i].l, S("busy")));
        expect_observed(o, "busy");
        CHECK_OK(tenure_leadership_resign(c[i].l));
        CHECK_OK(tenure_leadership_resign(c[i].l)); /* twice is fine */
        CHECK(!tenure_leadership_is_held(c[i].l));
        CHECK_RC(tenure_leadership_proclaim(c[i].l, S("late")), TENURE_ERR_NOT_LEADER);
        /* The next in line leads at once; after the last one, no one does. */
        if (i == CANDIDATES - 1) expect_observed(o, NULL);
    }
    CHECK_OK(tenure_election_leader(db, "svc", &kv));
    CHECK(kv == NULL);
    for (int i = 0; i < CANDIDATES; i++) {
        tenure_leadership_free(c[i].l);
        end_session(c[i].s);
    }
    tenure_watcher_free(w);
    tenure_observer_free(o);
    tenure_close(db);
}

struct observing {
    tenure_observer *o;
    tenure_result rc;
};

static void *observe_next(void *arg) {
    struct observing *ob = arg;
    tenure_kv *kv = NULL;
    ob->rc = tenure_observer_next(ob->o, -1, &kv);
    tenure_kv_free(kv);
    return NULL;
}

static void *campaign_blocked(void *arg) {
    struct candidate *c = arg;
    c->rc = tenure_election_campaign(c->s, "e", S("b"), -1, &c->l);
    return NULL;
}

static void s4_cancel_and_session_loss_interrupt_campaigns_and_observers(void) {
    tenure *db = open_memory(NULL);
    tenure_session *a = NULL;
    tenure_leadership *la = NULL, *lx = (tenure_leadership *)1;
    a = new_session(db);
    CHECK_OK(tenure_election_campaign(a, "e", S("a"), 0, &la));

    /* A campaign cancelled from another thread; its candidacy is withdrawn. */
    tenure_watcher *w = NULL;
    CHECK_OK(tenure_watch(db, S("e/"), TENURE_WATCH_PREFIX, 0, &w));
    struct candidate c = {.db = db, .l = NULL, .rc = -1};
    c.s = new_session(db);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, campaign_blocked, &c) == 0);
    await_put(w);
    CHECK_OK(tenure_session_cancel(c.s));
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_RC(c.rc, TENURE_ERR_TIMEOUT);
    CHECK(c.l == NULL);
    CHECK_RC(tenure_election_campaign(c.s, "e", S("b"), 100, &lx), TENURE_ERR_TIMEOUT);
    tenure_session_free(c.s);

    /* A campaign whose session is revoked stops with SESSION_EXPIRED. */
    tenure_watcher_free(w);
    CHECK_OK(tenure_watch(db, S("e/"), TENURE_WATCH_PREFIX, 0, &w));
    c = (struct candidate){.db = db, .l = NULL, .rc = -1};
    c.s = new_session(db);
    CHECK(pthread_create(&t, NULL, campaign_blocked, &c) == 0);
    await_put(w);
    CHECK_OK(tenure_lease_revoke(db, tenure_session_lease(c.s)));
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_RC(c.rc, TENURE_ERR_SESSION_EXPIRED);
    tenure_session_free(c.s);
    CHECK_RC(tenure_election_campaign(a, "e", S("a"), 50, &lx), TENURE_OK); /* re-campaign */
    CHECK_EQ(tenure_leadership_fencing_token(lx), tenure_leadership_fencing_token(la));
    tenure_leadership_free(lx);

    /* An observer blocked with no limit, cancelled from another thread. */
    struct observing ob = {.o = NULL, .rc = -1};
    CHECK_OK(tenure_election_observe(db, "e", &ob.o));
    expect_observed(ob.o, "a");
    CHECK(pthread_create(&t, NULL, observe_next, &ob) == 0);
    CHECK_OK(tenure_observer_cancel(ob.o));
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_RC(ob.rc, TENURE_ERR_TIMEOUT);
    tenure_observer_free(ob.o);

    /* Closing the engine ends observers and fails later calls. */
    ob = (struct observing){.o = NULL, .rc = -1};
    CHECK_OK(tenure_election_observe(db, "e", &ob.o));
    expect_observed(ob.o, "a");
    tenure *other = NULL;
    CHECK_OK(tenure_clone(db, &other));
    CHECK(pthread_create(&t, NULL, observe_next, &ob) == 0);
    tenure_close(db);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_RC(ob.rc, TENURE_ERR_CLOSED);
    tenure_kv *kv = (tenure_kv *)1;
    CHECK_RC(tenure_election_leader(other, "e", &kv), TENURE_ERR_CLOSED);
    tenure_observer *o2 = (tenure_observer *)1;
    CHECK_RC(tenure_election_observe(other, "e", &o2), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_leadership_proclaim(la, S("x")), TENURE_ERR_CLOSED);
    CHECK_RC(tenure_leadership_resign(la), TENURE_ERR_CLOSED);
    CHECK(kv == (tenure_kv *)1 && o2 == (tenure_observer *)1);
    tenure_observer_free(ob.o);
    tenure_leadership_free(la);
    tenure_watcher_free(w);
    tenure_session_free(a);
    tenure_free(other);
}

static void s4_misuse(void) {
    tenure *db = open_memory(NULL);
    tenure_session *s = NULL;
    s = new_session(db);
    tenure_leadership *l = (tenure_leadership *)1;
    CHECK_RC(tenure_election_campaign(NULL, "e", S("v"), 0, &l), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_election_campaign(s, NULL, S("v"), 0, &l), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_election_campaign(s, "e", NULL, 1, 0, &l), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_election_campaign(s, "e", S("v"), 0, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_election_campaign(s, "e", S("v"), -3, &l), TENURE_ERR_INVALID_ARGUMENT);
    CHECK(l == (tenure_leadership *)1);
    CHECK_RC(tenure_leadership_proclaim(NULL, S("v")), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_leadership_resign(NULL), TENURE_ERR_NULL_POINTER);
    CHECK_EQ(tenure_leadership_fencing_token(NULL), 0);
    CHECK(!tenure_leadership_is_held(NULL));
    CHECK_EQ(tenure_leadership_key(NULL).len, 0);
    tenure_leadership_free(NULL);
    tenure_kv *kv = (tenure_kv *)1;
    CHECK_RC(tenure_election_leader(NULL, "e", &kv), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_election_leader(db, NULL, &kv), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_election_leader(db, "e", NULL), TENURE_ERR_NULL_POINTER);
    tenure_observer *o = (tenure_observer *)1;
    CHECK_RC(tenure_election_observe(db, NULL, &o), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_election_observe(db, "e", NULL), TENURE_ERR_NULL_POINTER);
    CHECK(o == (tenure_observer *)1);
    CHECK_RC(tenure_observer_next(NULL, 0, &kv), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_observer_cancel(NULL), TENURE_ERR_NULL_POINTER);
    o = NULL;
    CHECK_OK(tenure_election_observe(db, "e", &o));
    CHECK_RC(tenure_observer_next(o, -2, &kv), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_observer_next(o, 0, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_OK(tenure_observer_next(o, 0, &kv)); /* the first state is at hand */
    CHECK(kv == NULL);
    CHECK_RC(tenure_observer_next(o, 0, &kv), TENURE_ERR_TIMEOUT);
    tenure_observer_free(o);
    tenure_observer_free(NULL);
    end_session(s);
    tenure_close(db);
}

/* ---- S5 ---------------------------------------------------------------------------------- */

static void s5_config_is_checked_by_the_core(void) {
    tenure *db = open_memory(NULL);
    tenure_elector_config cfg;
    tenure_elector_callbacks cb = {NULL, NULL, NULL};
    tenure_elector *e = (tenure_elector *)1;
    CHECK_RC(tenure_elector_config_init(NULL), TENURE_ERR_NULL_POINTER);
    CHECK_OK(tenure_elector_config_init(&cfg));
    CHECK_EQ(cfg.lease_duration_ms, 15000);
    CHECK_EQ(cfg.renew_deadline_ms, 10000);
    CHECK_EQ(cfg.retry_period_ms, 2000);
    CHECK(!cfg.release_on_cancel);
    CHECK_RC(tenure_elector_start(db, &cfg, &cb, NULL, &e), TENURE_ERR_NULL_POINTER);
    CHECK_MSG("cfg->name");
    cfg.name = "rec";
    CHECK_RC(tenure_elector_start(db, &cfg, &cb, NULL, &e), TENURE_ERR_NULL_POINTER);
    CHECK_MSG("cfg->identity");
    cfg.identity = "";
    CHECK_RC(tenure_elector_start(db, &cfg, &cb, NULL, &e), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("identity must not be empty");
    cfg.identity = "me";
    struct {
        int64_t lease, renew, retry;
        const char *why;
    } bad[] = {
        {10000, 10000, 2000, "lease_duration must be greater"},
        {15000, 2400, 2000, "retry_period"},
        {15000, 13500, 2000, "renew_deadline + retry_period"},
        {15000, 10000, 0, "positive"},
        {15000, -1, 2000, "negative"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cfg.lease_duration_ms = bad[i].lease;
        cfg.renew_deadline_ms = bad[i].renew;
        cfg.retry_period_ms = bad[i].retry;
        CHECK_RC(tenure_elector_start(db, &cfg, &cb, NULL, &e), TENURE_ERR_INVALID_ARGUMENT);
        CHECK_MSG(bad[i].why);
    }
    CHECK_RC(tenure_elector_start(NULL, &cfg, &cb, NULL, &e), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_elector_start(db, NULL, &cb, NULL, &e), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_elector_start(db, &cfg, NULL, NULL, &e), TENURE_ERR_NULL_POINTER);
    CHECK(e == (tenure_elector *)1);
    CHECK_RC(tenure_elector_stop(NULL), TENURE_ERR_NULL_POINTER);
    CHECK(!tenure_elector_is_leader(NULL));
    char *who = (char *)1;
    CHECK_RC(tenure_elector_leader(NULL, &who), TENURE_ERR_NULL_POINTER);
    CHECK(who == (char *)1);
    tenure_string_free(NULL);
    tenure_elector_free(NULL);
    tenure_close(db);
}

#define LOG_MAX 16

/* What one elector's callbacks saw, in order ("new:<id>", "start", "stop"). */
struct log {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char entries[LOG_MAX][24];
    int n;
    int64_t token;
    pthread_t thread; /* the thread the first callback ran on */
    int one_thread;   /* every callback ran on that thread */
    _Atomic(tenure_elector *) self;
    tenure_result stop_from_callback;
};

static void log_init(struct log *l) {
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->one_thread = 1;
    l->stop_from_callback = -1;
}

static void log_add(struct log *l, const char *what) {
    pthread_mutex_lock(&l->mu);
    if (l->n == 0) l->thread = pthread_self();
    else if (!pthread_equal(l->thread, pthread_self())) l->one_thread = 0;
    if (l->n < LOG_MAX) snprintf(l->entries[l->n++], sizeof l->entries[0], "%s", what);
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

/* Waits (bounded) until the log has `n` entries; true if it did. */
static int log_wait(struct log *l, int n, int ms) {
    struct timespec at;
    clock_gettime(CLOCK_REALTIME, &at);
    at.tv_sec += ms / 1000;
    at.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (at.tv_nsec >= 1000000000L) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&l->mu);
    int rc = 0;
    while (l->n < n && rc == 0) rc = pthread_cond_timedwait(&l->cv, &l->mu, &at);
    int ok = l->n >= n;
    pthread_mutex_unlock(&l->mu);
    return ok;
}

static int log_is(struct log *l, int i, const char *want) {
    pthread_mutex_lock(&l->mu);
    int ok = i < l->n && strcmp(l->entries[i], want) == 0;
    pthread_mutex_unlock(&l->mu);
    if (!ok) fprintf(stderr, "log entry %d: want %s\n", i, want);
    return ok;
}

static void on_started(void *user, int64_t token) {
    struct log *l = user;
    l->token = token;
    log_add(l, "start");
}

static void on_stopped(void *user) {
    struct log *l = user;
    tenure_elector *self = atomic_load(&l->self);
    if (self != NULL) l->stop_from_callback = tenure_elector_stop(self);
    log_add(l, "stop");
}

static void on_new_leader(void *user, const char *identity) {
    char what[24];
    snprintf(what, sizeof what, "new:%s", identity);
    log_add(user, what);
}

/* The elector's last observed leader is `want`. */
static int leader_is(tenure_elector *e, const char *want) {
    char *who = NULL;
    CHECK_OK(tenure_elector_leader(e, &who));
    int ok = who != NULL && strcmp(who, want) == 0;
    if (!ok) fprintf(stderr, "leader: want %s, got %s\n", want, who ? who : "(none)");
    tenure_string_free(who);
    return ok;
}

static void s5_elector_callbacks_run_in_order_on_one_thread(void) {
    tenure_clock *clock = NULL;
    CHECK_OK(tenure_clock_manual_new(&clock));
    tenure *db = open_memory(clock);
    tenure_elector_config cfg;
    CHECK_OK(tenure_elector_config_init(&cfg));
    cfg.name = "leader-record";
    cfg.lease_duration_ms = 3000;
    cfg.renew_deadline_ms = 2000;
    cfg.retry_period_ms = 500;
    cfg.release_on_cancel = true;
    tenure_elector_callbacks cb = {on_started, on_stopped, on_new_leader};

    struct log la, lb;
    log_init(&la);
    log_init(&lb);
    tenure_elector *a = NULL, *b = NULL;
    cfg.identity = "a";
    CHECK_OK(tenure_elector_start(db, &cfg, &cb, &la, &a));
    atomic_store(&la.self, a);
    CHECK(log_wait(&la, 2, WAIT_MS)); /* its first attempt runs at once */
    CHECK(log_is(&la, 0, "new:a"));
    CHECK(log_is(&la, 1, "start"));
    CHECK(tenure_elector_is_leader(a));
    CHECK(leader_is(a, "a"));
    CHECK_RC(tenure_elector_leader(a, NULL), TENURE_ERR_NULL_POINTER);
    cfg.identity = "b";
    CHECK_OK(tenure_elector_start(db, &cfg, &cb, &lb, &b));
    CHECK(log_wait(&lb, 1, WAIT_MS));
    CHECK(log_is(&lb, 0, "new:a"));
    CHECK(!tenure_elector_is_leader(b));
    CHECK(leader_is(b, "a"));

    /* a steps down and releases at once; b takes over at its next retry. */
    CHECK_OK(tenure_elector_stop(a));
    CHECK_OK(tenure_elector_stop(a)); /* again: the same result */
    CHECK(!tenure_elector_is_leader(a));
    CHECK_EQ(la.n, 3);
    CHECK(log_is(&la, 2, "stop"));
    CHECK_RC(la.stop_from_callback, TENURE_ERR_INVALID_ARGUMENT);
    CHECK(la.one_thread);
    CHECK(!pthread_equal(la.thread, pthread_self()));
    /* b sleeps on the manual clock: move it until b has retried (bounded). */
    for (int i = 0; i < 200 && !log_wait(&lb, 3, 50); i++) CHECK_OK(tenure_clock_advance(clock, 250));
    CHECK(log_wait(&lb, 3, 0));
    CHECK(log_is(&lb, 1, "new:b"));
    CHECK(log_is(&lb, 2, "start"));
    CHECK(lb.token > la.token);
    CHECK(tenure_elector_is_leader(b));
    CHECK(leader_is(b, "b"));
    CHECK(leader_is(a, "a")); /* a stopped: it observes nothing since */
    tenure_elector_free(b); /* stops it: its stop callback has run when free returns */
    CHECK_EQ(lb.n, 4);
    CHECK(log_is(&lb, 3, "stop"));
    CHECK(lb.one_thread);
    tenure_elector_free(a);
    tenure_close(db);
    tenure_clock_free(clock);
    pthread_mutex_destroy(&la.mu);
    pthread_cond_destroy(&la.cv);
    pthread_mutex_destroy(&lb.mu);
    pthread_cond_destroy(&lb.cv);
}

static void s5_stop_reports_an_engine_closed_under_it(void) {
    tenure *db = open_memory(NULL), *other = NULL;
    CHECK_OK(tenure_clone(db, &other));
    tenure_elector_config cfg;
    CHECK_OK(tenure_elector_config_init(&cfg));
    cfg.name = "rec";
    cfg.identity = "solo";
    tenure_elector_callbacks cb = {on_started, on_stopped, on_new_leader};
    struct log l;
    log_init(&l);
    tenure_elector *e = NULL;
    CHECK_OK(tenure_elector_start(db, &cfg, &cb, &l, &e));
    CHECK(log_wait(&l, 2, WAIT_MS));
    tenure_close(db);
    tenure_result rc = tenure_elector_stop(e);
    CHECK(rc == TENURE_OK || rc == TENURE_ERR_CLOSED);
    CHECK(log_is(&l, 2, "stop"));
    tenure_elector *e2 = (tenure_elector *)1;
    CHECK_RC(tenure_elector_start(other, &cfg, &cb, &l, &e2), TENURE_OK);
    /* Started on a closed engine: its loop ends with CLOSED, reported by stop. */
    CHECK_RC(tenure_elector_stop(e2), TENURE_ERR_CLOSED);
    tenure_elector_free(e2);
    tenure_elector_free(e);
    tenure_free(other);
    pthread_mutex_destroy(&l.mu);
    pthread_cond_destroy(&l.cv);
}

/* A callback may stop another elector (only its own would deadlock). */
struct stopper {
    tenure_elector *other;
    tenure_result rc;
    struct log log;
};

static void stop_other(void *user, int64_t token) {
    struct stopper *st = user;
    (void)token;
    st->rc = tenure_elector_stop(st->other);
    log_add(&st->log, "start");
}

static void s5_a_callback_may_stop_another_elector(void) {
    tenure *db = open_memory(NULL);
    tenure_elector_config cfg;
    CHECK_OK(tenure_elector_config_init(&cfg));
    struct log ly;
    log_init(&ly);
    tenure_elector_callbacks cb = {on_started, on_stopped, on_new_leader};
    tenure_elector *y = NULL, *x = NULL;
    cfg.name = "rec-y";
    cfg.identity = "y";
    CHECK_OK(tenure_elector_start(db, &cfg, &cb, &ly, &y));
    CHECK(log_wait(&ly, 2, WAIT_MS));

    struct stopper st = {.other = y, .rc = -1};
    log_init(&st.log);
    tenure_elector_callbacks cx = {stop_other, NULL, NULL};
    cfg.name = "rec-x";
    cfg.identity = "x";
    CHECK_OK(tenure_elector_start(db, &cfg, &cx, &st, &x));
    CHECK(log_wait(&st.log, 1, WAIT_MS));
    CHECK_RC(st.rc, TENURE_OK);
    CHECK(log_is(&ly, 2, "stop")); /* y's callbacks had all run when its stop returned */
    CHECK(!tenure_elector_is_leader(y));
    CHECK(tenure_elector_is_leader(x));
    tenure_elector_free(x);
    tenure_elector_free(y);
    tenure_close(db);
    pthread_mutex_destroy(&ly.mu);
    pthread_cond_destroy(&ly.cv);
    pthread_mutex_destroy(&st.log.mu);
    pthread_cond_destroy(&st.log.cv);
}

void election_tests(void) {
    RUN(s4_campaigns_win_in_order_and_observers_see_every_change);
    RUN(s4_cancel_and_session_loss_interrupt_campaigns_and_observers);
    RUN(s4_misuse);
    RUN(s5_config_is_checked_by_the_core);
    RUN(s5_elector_callbacks_run_in_order_on_one_thread);
    RUN(s5_stop_reports_an_engine_closed_under_it);
    RUN(s5_a_callback_may_stop_another_elector);
}
