/* Several pthreads on one handle, and blocked calls woken by a close from another handle. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "check.h"

#define THREADS 4
#define ROUNDS 40

struct worker {
    tenure *db;
    int n;
    int64_t granted[ROUNDS];
};

static void *work(void *arg) {
    struct worker *w = arg;
    char key[64];
    for (int i = 0; i < ROUNDS; i++) {
        int64_t id = 0, ttl = 0, of = 0, rev = 0;
        snprintf(key, sizeof key, "t%d/%03d", w->n, i);
        CHECK_OK(tenure_lease_grant(w->db, 60000, 0, &id));
        w->granted[i] = id;
        CHECK_OK(tenure_put(w->db, (const uint8_t *)key, strlen(key), (const uint8_t *)key,
                            strlen(key), id, &rev));
        CHECK(rev > 0);
        CHECK_OK(tenure_lease_renew(w->db, id, &ttl));
        CHECK_EQ(ttl, 60000);
        CHECK_OK(tenure_lease_of(w->db, (const uint8_t *)key, strlen(key), &of));
        CHECK_EQ(of, id);
        if (i % 2 == 1) CHECK_OK(tenure_lease_revoke(w->db, id));
        /* Errors on this thread carry this thread's detail. */
        CHECK_RC(tenure_lease_revoke(w->db, -100 - w->n), TENURE_ERR_LEASE_NOT_FOUND);
        char want[32];
        snprintf(want, sizeof want, "lease %d not found", -100 - w->n);
        CHECK_MSG(want);
    }
    return NULL;
}

static void threads_grant_put_renew_and_revoke_on_one_handle(void) {
    tenure *db = open_memory(NULL);
    pthread_t t[THREADS];
    struct worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i].db = db;
        w[i].n = i;
        CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);

    tenure_stats s;
    CHECK_OK(tenure_stats_read(db, &s));
    CHECK_EQ(s.granted, THREADS * ROUNDS);
    CHECK_EQ(s.revoked, THREADS * ROUNDS / 2);
    CHECK_EQ(s.renewed, THREADS * ROUNDS);
    CHECK_EQ(s.leases, THREADS * ROUNDS / 2);
    CHECK_EQ(s.keys, THREADS * ROUNDS / 2);
    /* puts + revokes, one revision each */
    CHECK_EQ(s.revision, THREADS * ROUNDS + THREADS * ROUNDS / 2);

    /* Every ID distinct. */
    int distinct = 1;
    for (int a = 0; a < THREADS * ROUNDS; a++)
        for (int b = a + 1; b < THREADS * ROUNDS; b++)
            if (w[a / ROUNDS].granted[a % ROUNDS] == w[b / ROUNDS].granted[b % ROUNDS])
                distinct = 0;
    CHECK(distinct);
    /* The surviving keys are exactly the even rounds of each thread. */
    tenure_kv_list *l = NULL;
    CHECK_OK(tenure_range(db, S("t"), 0, &l));
    CHECK_EQ(tenure_kv_list_len(l), THREADS * ROUNDS / 2);
    tenure_bytes k = tenure_kv_key(tenure_kv_list_get(l, 1));
    CHECK(k.len == 6 && memcmp(k.data, "t0/002", 6) == 0);
    tenure_kv_list_free(l);
    tenure_close(db);
}

struct blocked {
    tenure *db;
    tenure_watcher *w;
    atomic_int ready;
    tenure_result expired_rc;
    tenure_result watch_rc;
};

static void *wait_expired(void *arg) {
    struct blocked *b = arg;
    tenure_expired *e = NULL;
    atomic_fetch_add(&b->ready, 1);
    b->expired_rc = tenure_expired_next(b->db, -1, &e); /* no limit: only close ends it */
    tenure_expired_free(e);
    return NULL;
}

static void *wait_watch(void *arg) {
    struct blocked *b = arg;
    tenure_event *ev = NULL;
    atomic_fetch_add(&b->ready, 1);
    b->watch_rc = tenure_watcher_next(b->w, -1, &ev);
    tenure_event_free(ev);
    return NULL;
}

static void close_wakes_calls_blocked_on_other_handles(void) {
    tenure *db = open_memory(NULL);
    struct blocked b;
    b.ready = 0;
    b.expired_rc = -1;
    b.watch_rc = -1;
    CHECK_OK(tenure_clone(db, &b.db));
    CHECK_OK(tenure_watch(db, S("never"), 0, 0, &b.w));
    pthread_t t1, t2;
    CHECK(pthread_create(&t1, NULL, wait_expired, &b) == 0);
    CHECK(pthread_create(&t2, NULL, wait_watch, &b) == 0);
    while (atomic_load(&b.ready) < 2) sched_yield();
    tenure_close(db); /* whether the threads are already waiting or not, they must end */
    CHECK(pthread_join(t1, NULL) == 0);
    CHECK(pthread_join(t2, NULL) == 0);
    CHECK_RC(b.expired_rc, TENURE_ERR_CLOSED);
    CHECK_RC(b.watch_rc, TENURE_ERR_CLOSED);
    tenure_watcher_free(b.w);
    tenure_free(b.db);
}

void thread_tests(void) {
    RUN(threads_grant_put_renew_and_revoke_on_one_handle);
    RUN(close_wakes_calls_blocked_on_other_handles);
}
