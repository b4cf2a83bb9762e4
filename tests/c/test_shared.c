/* Several processes on one file through the C API (SPEC P18-P21): `tenure_options.shared`,
 * `tenure_stats.owner`, what a process that does not own the file may not call, the second
 * plain open's message, and a lock held by a process killed with SIGKILL.
 *
 * The other processes are this test binary again (`argv[0] --shared-child MODE PATH`, or /proc/self/exe;
 * see shared_child_main), started with fork+exec so that nothing of this multi-threaded process
 * runs in the child. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* The session TTL of the lock holder: long, so a lock taken well before it was freed by the
 * holder's death, not by its lease running out. */
#define HOLDER_TTL_MS 30000
/* SPEC P20: a dead holder's lock is taken by the next waiter within this many ms. */
#define DEATH_TO_LOCK_MS 100

const char *test_binary = "/proc/self/exe";

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* valgrind runs every thread on one core, far slower: there only "before the TTL" is checked. */
static int under_valgrind(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int found = 0;
    if (f == NULL) return 0;
    while (!found && fgets(line, sizeof line, f) != NULL) found = strstr(line, "vgpreload") != NULL;
    fclose(f);
    return found;
}

static tenure *open_shared(const char *path) {
    tenure_options o;
    tenure *db = NULL;
    CHECK_OK(tenure_options_init(&o));
    o.shared = true;
    CHECK_OK(tenure_open(path, &o, &db));
    return db;
}

/* Starts this binary as `--shared-child mode path`; its stdout goes to `*out_fd` when given. */
static pid_t spawn_child(const char *mode, const char *path, int *out_fd) {
    int fds[2] = {-1, -1};
    if (out_fd != NULL && pipe(fds) != 0) {
        perror("pipe");
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (out_fd != NULL) {
            dup2(fds[1], STDOUT_FILENO);
            close(fds[0]);
            close(fds[1]);
        }
        char *argv[] = {"tests", "--shared-child", (char *)mode, (char *)path, NULL};
        execv(test_binary, argv);
        _exit(127);
    }
    if (out_fd != NULL) {
        close(fds[1]);
        *out_fd = fds[0];
    }
    return pid;
}

static int wait_exit(pid_t pid) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ---- the children ------------------------------------------------------------------------ */

/* Opens shared while the test process owns the file: sees its key, writes one, and is refused
 * the engine-only calls, each naming itself. */
static void child_sees_one_database(const char *path) {
    tenure *db = open_shared(path);
    if (db == NULL) return;
    tenure_stats s;
    CHECK_OK(tenure_stats_read(db, &s));
    CHECK(!s.owner);
    tenure_kv *kv = NULL;
    CHECK_OK(tenure_get(db, S("shared/a"), &kv));
    CHECK(kv != NULL && bytes_eq(tenure_kv_value(kv), "from the owner"));
    tenure_kv_free(kv);
    CHECK_OK(tenure_put(db, S("shared/b"), S("from a non-owner"), 0, OUT_I64));
    CHECK_RC(tenure_promote(db, 0), TENURE_ERR_UNSUPPORTED);
    CHECK_MSG("promote");
    CHECK_RC(tenure_demote(db), TENURE_ERR_UNSUPPORTED);
    CHECK_MSG("demote");
    tenure_expired *ex = NULL;
    CHECK_RC(tenure_expired_next(db, 0, &ex), TENURE_ERR_UNSUPPORTED);
    CHECK_MSG("expired");
    CHECK(ex == NULL);
    int64_t lease = 0;
    CHECK_OK(tenure_lease_grant(db, 60000, 0, &lease));
    CHECK_RC(tenure_lease_checkpoint(db, lease, 1000), TENURE_ERR_UNSUPPORTED);
    CHECK_MSG("checkpoint");
    CHECK_OK(tenure_lease_revoke(db, lease));
    tenure_close(db);
}

/* A plain (not shared) open of a file another process has open. */
static void child_opens_plain(const char *path) {
    tenure *db = NULL;
    CHECK_RC(tenure_open(path, NULL, &db), TENURE_ERR_ALREADY_OPEN);
    CHECK_MSG("shared");
    CHECK_MSG("tenure serve");
    CHECK(db == NULL);
    tenure_close(db);
}

/* Holds a mutex, says so with its fencing token on stdout, and waits to be killed. */
static void child_holds_a_lock(const char *path) {
    tenure *db = open_shared(path);
    if (db == NULL) return;
    tenure_session *s = NULL;
    tenure_lock *l = NULL;
    CHECK_OK(tenure_session_new(db, HOLDER_TTL_MS, &s));
    if (s == NULL) return;
    CHECK_OK(tenure_mutex_lock(s, "shared/m", WAIT_MS, &l));
    if (l == NULL) return;
    printf("held %lld\n", (long long)tenure_lock_fencing_token(l));
    fflush(stdout);
    for (;;) pause();
}

/* ---- a change of owner seen from a survivor (P5, P15, P16) -------------------------------- */

/* The survivor's session TTL: several of them pass with the new owner serving. Under valgrind
 * the change of owner alone can take longer than 2 s (a new engine opens the file there, every
 * thread on one core), and the lease would end before its first renewal reaches the new owner. */
static int64_t survivor_ttl_ms(void) {
    static int64_t ttl = 0;
    if (ttl == 0) ttl = under_valgrind() ? 10000 : 2000;
    return ttl;
}
#define SURVIVOR_TTL_MS survivor_ttl_ms()

/* Owns the file, says so on stdout, and waits to be killed. */
static void child_owns(const char *path) {
    tenure *db = open_shared(path);
    if (db == NULL) return;
    tenure_stats s;
    CHECK_OK(tenure_stats_read(db, &s));
    printf("own %d\n", s.owner ? 1 : 0);
    fflush(stdout);
    for (;;) pause();
}

/* The owner (a child) is killed with SIGKILL; this process, the only other, takes the file
 * over: its calls go on, its watch sees every event once and in order (the revisions of its own
 * puts, contiguous), and its session keeps its lease and its lock past several TTLs. */
static void p5_a_survivor_takes_over_with_its_watch_and_its_lock(void) {
    char path[512];
    test_path(path, sizeof path, "shared-takeover.tenure");
    int out = -1;
    pid_t owner = spawn_child("own", path, &out);
    FILE *f = fdopen(out, "r");
    char line[64] = {0};
    CHECK(f != NULL && fgets(line, sizeof line, f) != NULL);
    CHECK(strcmp(line, "own 1\n") == 0);
    tenure *db = open_shared(path);
    tenure_stats st;
    tenure_watcher *w = NULL;
    tenure_session *s = NULL;
    tenure_lock *l = NULL;
    if (db == NULL) goto out;
    CHECK_OK(tenure_stats_read(db, &st));
    CHECK(!st.owner);
    CHECK_OK(tenure_watch(db, S("w/"), TENURE_WATCH_PREFIX, 0, &w));
    CHECK_OK(tenure_session_new(db, SURVIVOR_TTL_MS, &s));
    if (w == NULL || s == NULL) goto out;
    CHECK_OK(tenure_mutex_lock(s, "shared/t", WAIT_MS, &l));
    for (int i = 0; i < 10; i++) {
        if (i == 5) {
            CHECK_EQ(kill(owner, SIGKILL), 0);
            CHECK_EQ(wait_exit(owner), 128 + SIGKILL);
            owner = -1;
        }
        char key[16];
        snprintf(key, sizeof key, "w/%d", i);
        /* After the kill each put waits through the change of owner (P14) and succeeds. The
         * first may have gone out on the dead owner's connection before this process saw it
         * close: its answer is lost, so it is UNAVAILABLE, never repeated (P14); put again. */
        int rc = tenure_put(db, S(key), S("v"), 0, OUT_I64);
        if (i == 5 && rc == TENURE_ERR_UNAVAILABLE)
            rc = tenure_put(db, S(key), S("v"), 0, OUT_I64);
        CHECK_EQ(rc, TENURE_OK);
    }
    int64_t killed = now_ms();
    CHECK_OK(tenure_stats_read(db, &st));
    CHECK(st.owner);
    int64_t first = 0;
    for (int i = 0; i < 10; i++) {
        tenure_event *ev = NULL;
        CHECK_OK(tenure_watcher_next(w, WAIT_MS, &ev));
        if (ev == NULL) break;
        int64_t rev = tenure_event_revision(ev);
        if (i == 0) first = rev;
        CHECK_EQ(rev, first + i);
        tenure_event_free(ev);
    }
    int checks = 0;
    while (now_ms() - killed < 3 * SURVIVOR_TTL_MS) {
        CHECK(!tenure_session_done(s));
        tenure_session *other = NULL;
        tenure_lock *taken = NULL;
        CHECK_OK(tenure_session_new(db, SURVIVOR_TTL_MS, &other));
        CHECK_RC(tenure_mutex_try_lock(other, "shared/t", &taken), TENURE_ERR_LOCKED);
        tenure_lock_free(taken);
        if (other != NULL) CHECK_OK(tenure_session_close(other));
        tenure_session_free(other);
        checks++;
    }
    CHECK(checks > 0);
    tenure_lease_info *info = NULL;
    CHECK_OK(tenure_lease_time_to_live(db, tenure_session_lease(s), &info));
    tenure_lease_info_free(info);
    if (l != NULL) CHECK_OK(tenure_lock_unlock(l));
out:
    tenure_lock_free(l);
    if (s != NULL) CHECK_OK(tenure_session_close(s));
    tenure_session_free(s);
    tenure_watcher_free(w);
    tenure_close(db);
    if (owner > 0) {
        kill(owner, SIGKILL);
        wait_exit(owner);
    }
    if (f != NULL) fclose(f);
}

int shared_child_main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: --shared-child see|plain|hold|own PATH\n");
        return 2;
    }
    if (strcmp(argv[2], "see") == 0) {
        child_sees_one_database(argv[3]);
    } else if (strcmp(argv[2], "plain") == 0) {
        child_opens_plain(argv[3]);
    } else if (strcmp(argv[2], "hold") == 0) {
        child_holds_a_lock(argv[3]);
    } else if (strcmp(argv[2], "own") == 0) {
        child_owns(argv[3]);
    } else {
        fprintf(stderr, "unknown child mode %s\n", argv[2]);
        return 2;
    }
    return atomic_load(&check_failures) == 0 ? 0 : 1;
}

/* ---- the cases --------------------------------------------------------------------------- */

static void p18_shared_is_off_by_default_and_an_engine_owns_its_file(void) {
    tenure_options o;
    CHECK_OK(tenure_options_init(&o));
    CHECK(!o.shared);
    tenure *db = open_memory(NULL);
    tenure_stats s;
    CHECK_OK(tenure_stats_read(db, &s));
    CHECK(s.owner);
    tenure_close(db);
    /* Shared mode needs a file: every process must find the same one. */
    o.shared = true;
    CHECK_RC(tenure_open(NULL, &o, &db), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("shared");
}

static void p18_two_processes_see_one_database(void) {
    char path[512];
    test_path(path, sizeof path, "shared-two.tenure");
    tenure *db = open_shared(path);
    if (db == NULL) return;
    tenure_stats s;
    CHECK_OK(tenure_stats_read(db, &s));
    CHECK(s.owner);
    CHECK_OK(tenure_put(db, S("shared/a"), S("from the owner"), 0, OUT_I64));
    CHECK_EQ(wait_exit(spawn_child("see", path, NULL)), 0);
    tenure_kv *kv = NULL;
    CHECK_OK(tenure_get(db, S("shared/b"), &kv));
    CHECK(kv != NULL && bytes_eq(tenure_kv_value(kv), "from a non-owner"));
    tenure_kv_free(kv);
    tenure_close(db);
}

static void p19_a_second_plain_open_names_shared_and_tenure_serve(void) {
    char path[512];
    test_path(path, sizeof path, "shared-plain.tenure");
    tenure *db = NULL;
    CHECK_OK(tenure_open(path, NULL, &db));
    CHECK_EQ(wait_exit(spawn_child("plain", path, NULL)), 0);
    tenure_close(db);
}

struct waiter {
    tenure_session *session;
    tenure_lock *lock;
    tenure_result rc;
    int64_t acquired_ms;
};

static void *wait_for_lock(void *arg) {
    struct waiter *w = arg;
    w->rc = tenure_mutex_lock(w->session, "shared/m", WAIT_MS, &w->lock);
    w->acquired_ms = now_ms();
    return NULL;
}

static void p20_a_lock_held_by_a_killed_process_is_taken_at_once(void) {
    char path[512];
    test_path(path, sizeof path, "shared-kill.tenure");
    tenure *db = open_shared(path);
    if (db == NULL) return;
    int out = -1;
    pid_t holder = spawn_child("hold", path, &out);
    char line[64] = {0};
    FILE *f = fdopen(out, "r");
    CHECK(f != NULL && fgets(line, sizeof line, f) != NULL);
    long long held = 0;
    CHECK(sscanf(line, "held %lld", &held) == 1 && held > 0);

    /* The waiter is queued once its key is put under the lock's prefix. */
    tenure_watcher *queued = NULL;
    CHECK_OK(tenure_watch(db, S("shared/m/"), TENURE_WATCH_PREFIX, 0, &queued));
    struct waiter w = {.session = new_session(db)};
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, wait_for_lock, &w), 0);
    tenure_event *ev = NULL;
    CHECK_OK(tenure_watcher_next(queued, WAIT_MS, &ev));
    CHECK(ev != NULL && tenure_event_type(ev) == TENURE_EVENT_PUT);
    tenure_event_free(ev);
    tenure_watcher_free(queued);
    int64_t killed = now_ms();
    CHECK_EQ(kill(holder, SIGKILL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_RC(w.rc, TENURE_OK);
    int64_t took = w.acquired_ms - killed;
    CHECK(took < HOLDER_TTL_MS / 2);
    if (!under_valgrind()) CHECK(took < DEATH_TO_LOCK_MS);
    if (w.lock != NULL) {
        CHECK(tenure_lock_fencing_token(w.lock) > held);
        CHECK_OK(tenure_lock_unlock(w.lock));
    }
    tenure_lock_free(w.lock);
    CHECK_EQ(wait_exit(holder), 128 + SIGKILL);
    if (f != NULL) fclose(f);
    end_session(w.session);
    tenure_close(db);
}

void shared_tests(void) {
    RUN(p18_shared_is_off_by_default_and_an_engine_owns_its_file);
    RUN(p18_two_processes_see_one_database);
    RUN(p19_a_second_plain_open_names_shared_and_tenure_serve);
    RUN(p20_a_lock_held_by_a_killed_process_is_taken_at_once);
    RUN(p5_a_survivor_takes_over_with_its_watch_and_its_lock);
}
