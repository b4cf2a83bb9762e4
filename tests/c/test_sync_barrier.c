/* Barriers from C (SPEC S11): a barrier released from another thread, a double barrier of two
 * threads, cancellation and misuse. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>

#include "check.h"

struct waiter {
    const tenure_barrier *b;
    tenure_result rc;
};

static void *wait_barrier(void *arg) {
    struct waiter *w = arg;
    w->rc = tenure_barrier_wait(w->b, WAIT_MS);
    return NULL;
}

static void s11_a_barrier_holds_waiters_until_released(void) {
    tenure *db = open_memory(NULL);
    tenure_barrier *b = NULL;
    CHECK_OK(tenure_barrier_new(db, "gate", &b));
    CHECK_OK(tenure_barrier_wait(b, 0)); /* free: passes */
    bool put = false;
    CHECK_OK(tenure_barrier_hold(b, &put));
    CHECK(put);
    CHECK_OK(tenure_barrier_hold(b, &put));
    CHECK(!put);
    CHECK_OK(tenure_barrier_hold(b, NULL));
    CHECK_RC(tenure_barrier_wait(b, 10), TENURE_ERR_TIMEOUT);
    struct waiter w = {b, TENURE_ERR_PANIC};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, wait_barrier, &w) == 0);
    CHECK_OK(tenure_barrier_release(b));
    pthread_join(t, NULL);
    CHECK_OK(w.rc);
    /* Cancel ends a wait on a held barrier. */
    CHECK_OK(tenure_barrier_hold(b, NULL));
    CHECK_OK(tenure_barrier_cancel(b));
    CHECK_RC(tenure_barrier_wait(b, -1), TENURE_ERR_TIMEOUT);
    CHECK_RC(tenure_barrier_wait(b, -2), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_barrier_hold(NULL, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_barrier_new(db, NULL, &b), TENURE_ERR_NULL_POINTER);
    tenure_barrier_free(NULL);
    tenure_barrier_free(b);
    tenure_close(db);
}

struct participant {
    tenure *db;
    tenure_result enter, leave;
};

static void *participate(void *arg) {
    struct participant *p = arg;
    tenure_session *s = new_session(p->db);
    tenure_double_barrier *b = NULL;
    CHECK_OK(tenure_double_barrier_new(s, "pair", 2, &b));
    p->enter = tenure_double_barrier_enter(b, WAIT_MS);
    p->leave = tenure_double_barrier_leave(b, WAIT_MS);
    tenure_double_barrier_free(b);
    end_session(s);
    return NULL;
}

static void s11_a_double_barrier_lets_two_threads_in_and_out_together(void) {
    tenure *db = open_memory(NULL);
    struct participant a = {db, TENURE_ERR_PANIC, TENURE_ERR_PANIC}, b = a;
    pthread_t ta, tb;
    CHECK(pthread_create(&ta, NULL, participate, &a) == 0);
    CHECK(pthread_create(&tb, NULL, participate, &b) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK_OK(a.enter);
    CHECK_OK(b.enter);
    CHECK_OK(a.leave);
    CHECK_OK(b.leave);
    tenure_kv_list *l = NULL;
    CHECK_OK(tenure_range(db, S("pair/"), 0, &l));
    CHECK_EQ(tenure_kv_list_len(l), 0);
    tenure_kv_list_free(l);

    /* Alone in a barrier of two: enter times out and withdraws; misuse. */
    tenure_session *s = new_session(db);
    tenure_double_barrier *d = NULL;
    CHECK_RC(tenure_double_barrier_new(s, "pair", 0, &d), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_OK(tenure_double_barrier_new(s, "pair", 2, &d));
    CHECK_RC(tenure_double_barrier_enter(d, 50), TENURE_ERR_TIMEOUT);
    CHECK_OK(tenure_range(db, S("pair/"), 0, &l));
    CHECK_EQ(tenure_kv_list_len(l), 0);
    tenure_kv_list_free(l);
    CHECK_RC(tenure_double_barrier_leave(d, 0), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("leave before enter");
    CHECK_RC(tenure_double_barrier_enter(NULL, 0), TENURE_ERR_NULL_POINTER);
    tenure_double_barrier_free(NULL);
    tenure_double_barrier_free(d);
    end_session(s);
    tenure_close(db);
}

void barrier_tests(void) {
    RUN(s11_a_barrier_holds_waiters_until_released);
    RUN(s11_a_double_barrier_lets_two_threads_in_and_out_together);
}
