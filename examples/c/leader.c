/* A daemon that works only while it leads: two instances ("node-1", "node-2") run a leader
 * elector on one record; each has a worker thread that does a unit of work only while its
 * instance leads, and every write to the shared resource passes a fence gate with the
 * leadership's fencing token, so a deposed leader's late write is refused. node-1 shuts down
 * after a while, node-2 takes over, and the program ends by itself (a few seconds).
 *
 * Build against an installed libtenure:
 *   cc -std=c11 -pthread leader.c $(pkg-config --cflags --libs tenure) -o leader
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <tenure.h>

#define TRY(call)                                                                         \
    do {                                                                                  \
        tenure_result rc_ = (call);                                                       \
        if (rc_ != TENURE_OK) {                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, tenure_result_str(rc_), \
                    tenure_last_error_message());                                         \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

/* The shared resource: writes are admitted in fencing-token order. */
static tenure_fence_gate *gate;

struct node {
    const char *name;
    pthread_mutex_t mu; /* guards leading, token, quit */
    pthread_cond_t cv;
    bool leading, quit;
    int64_t token;
    int units; /* work done (worker thread only) */
    tenure_elector *elector;
    pthread_t worker;
};

/* Elector callbacks: they run on one library thread per elector, one at a time, in order
 * (new leader, started, stopped); they only record the state and wake the worker. */
static void started(void *user, int64_t token) {
    struct node *n = user;
    pthread_mutex_lock(&n->mu);
    n->leading = true;
    n->token = token;
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
    printf("%s: leading with fencing token %lld\n", n->name, (long long)token);
}

static void stopped(void *user) {
    struct node *n = user;
    pthread_mutex_lock(&n->mu);
    n->leading = false;
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
    printf("%s: stopped leading\n", n->name);
}

static void new_leader(void *user, const char *identity) {
    printf("%s: the leader is now %s\n", ((struct node *)user)->name, identity);
}

static void pause_ms(long ms) {
    nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
}

/* Does a unit of work every 50 ms while leading; waits (without spinning) otherwise. */
static void *work(void *arg) {
    struct node *n = arg;
    for (;;) {
        pthread_mutex_lock(&n->mu);
        while (!n->leading && !n->quit) pthread_cond_wait(&n->cv, &n->mu);
        bool quit = n->quit;
        int64_t token = n->token;
        pthread_mutex_unlock(&n->mu);
        if (quit) return NULL;
        if (tenure_fence_gate_admit(gate, token) == TENURE_OK) n->units++;
        pause_ms(50);
    }
}

static void start_node(struct node *n, tenure *db, const char *name) {
    n->name = name;
    pthread_mutex_init(&n->mu, NULL);
    pthread_cond_init(&n->cv, NULL);
    n->leading = n->quit = false;
    n->token = 0;
    n->units = 0;
    tenure_elector_config cfg;
    TRY(tenure_elector_config_init(&cfg));
    cfg.name = "daemon/leader";
    cfg.identity = name;
    cfg.lease_duration_ms = 1500; /* short, for the demo; the defaults are 15 s / 10 s / 2 s */
    cfg.renew_deadline_ms = 1000;
    cfg.retry_period_ms = 200;
    cfg.release_on_cancel = true; /* a clean shutdown hands over at once */
    tenure_elector_callbacks cb = {started, stopped, new_leader};
    if (pthread_create(&n->worker, NULL, work, n) != 0) exit(1);
    TRY(tenure_elector_start(db, &cfg, &cb, n, &n->elector));
}

/* Waits up to `ms` for `n` to lead. */
static bool await_leading(struct node *n, long ms) {
    for (long waited = 0; waited < ms; waited += 20) {
        pthread_mutex_lock(&n->mu);
        bool leading = n->leading;
        pthread_mutex_unlock(&n->mu);
        if (leading) return true;
        pause_ms(20);
    }
    return false;
}

static void stop_node(struct node *n) {
    TRY(tenure_elector_stop(n->elector)); /* every callback has run when it returns */
    pthread_mutex_lock(&n->mu);
    n->quit = true;
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
    pthread_join(n->worker, NULL);
    tenure_elector_free(n->elector);
    pthread_mutex_destroy(&n->mu);
    pthread_cond_destroy(&n->cv);
}

int main(void) {
    tenure *db = NULL;
    TRY(tenure_open(NULL, NULL, &db)); /* in memory; give a path to survive restarts */
    TRY(tenure_fence_gate_new(&gate));

    struct node a, b;
    start_node(&a, db, "node-1");
    if (!await_leading(&a, 10000)) return 1;
    start_node(&b, db, "node-2");
    pause_ms(600); /* node-1 works; node-2 follows */
    int64_t old_token = a.token;

    printf("node-1: shutting down\n");
    stop_node(&a);
    if (!await_leading(&b, 10000)) return 1;
    pause_ms(600); /* node-2 works */

    /* A write carrying the deposed leader's token is refused by the gate. */
    tenure_result rc = tenure_fence_gate_admit(gate, old_token);
    printf("late write with token %lld: %s\n", (long long)old_token, tenure_result_str(rc));
    stop_node(&b);

    printf("work done: node-1 %d units, node-2 %d units; highest token %lld\n", a.units,
           b.units, (long long)tenure_fence_gate_highest(gate));
    tenure_fence_gate_free(gate);
    tenure_close(db);
    return a.units > 0 && b.units > 0 && rc == TENURE_ERR_STALE_TOKEN ? 0 : 1;
}
