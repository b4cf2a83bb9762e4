/* Online snapshots through the C API (SPEC D8): a snapshot taken while threads write holds
 * every write acknowledged up to its revision and none after; progress; errors. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "check.h"

#define WRITERS 4
#define MAX_WRITES 4000

struct writer {
    tenure *db;
    int n;
    int count;
    int64_t revs[MAX_WRITES];
};

static atomic_int stop_writers;
static atomic_int acked;

static void key_of(char *buf, size_t size, int writer, int i) {
    snprintf(buf, size, "w%d/%05d", writer, i);
}

static void *write_keys(void *arg) {
    struct writer *w = arg;
    char key[32];
    while (!atomic_load(&stop_writers) && w->count < MAX_WRITES) {
        key_of(key, sizeof key, w->n, w->count);
        int64_t rev = 0;
        CHECK_OK(tenure_put(w->db, S(key), S("v"), 0, &rev));
        w->revs[w->count++] = rev;
        atomic_fetch_add(&acked, 1);
    }
    return NULL;
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Opens a fresh database `name` in the test directory; its path goes to `path`, and the path of
 * `dest_name` (the snapshot's destination) to `dest`. */
static tenure *open_pair(const char *name, const char *dest_name, char *path, char *dest) {
    test_path(path, 512, name);
    test_path(dest, 512, dest_name);
    tenure *db = NULL;
    CHECK_OK(tenure_open(path, NULL, &db));
    return db;
}

static void d8_snapshot_while_threads_write_holds_exactly_the_writes_up_to_its_revision(void) {
    char path[512], dest[512];
    tenure *db = open_pair("snap-src.tenure", "snap-copy.tenure", path, dest);
    static struct writer w[WRITERS];
    pthread_t t[WRITERS];
    atomic_store(&stop_writers, 0);
    atomic_store(&acked, 0);
    for (int i = 0; i < WRITERS; i++) {
        w[i].db = db;
        w[i].n = i;
        w[i].count = 0;
        CHECK(pthread_create(&t[i], NULL, write_keys, &w[i]) == 0);
    }
    while (atomic_load(&acked) < 40) sched_yield();
    tenure_snapshot_info info;
    memset(&info, 0, sizeof info);
    CHECK_OK(tenure_snapshot(db, dest, NULL, NULL, &info));
    atomic_store(&stop_writers, 1);
    for (int i = 0; i < WRITERS; i++) pthread_join(t[i], NULL);
    CHECK(info.revision >= 40);
    tenure_close(db);

    tenure *copy = NULL;
    CHECK_OK(tenure_open(dest, NULL, &copy));
    int64_t rev = 0;
    CHECK_OK(tenure_revision(copy, &rev));
    CHECK_EQ(rev, info.revision);
    uint64_t before = 0;
    char key[32];
    for (int i = 0; i < WRITERS; i++) {
        for (int j = 0; j < w[i].count; j++) {
            key_of(key, sizeof key, i, j);
            tenure_kv *kv = NULL;
            CHECK_OK(tenure_get(copy, S(key), &kv));
            if (w[i].revs[j] <= info.revision) {
                before++;
                CHECK(kv != NULL);
                if (kv != NULL) CHECK_EQ(tenure_kv_mod_revision(kv), w[i].revs[j]);
            } else {
                CHECK(kv == NULL);
            }
            tenure_kv_free(kv);
        }
    }
    CHECK_EQ(info.keys, before);
    tenure_stats s;
    CHECK_OK(tenure_stats_read(copy, &s));
    CHECK_EQ(s.keys, before);
    tenure_close(copy);
}

struct progress {
    int calls;
    uint64_t last_done, last_total;
};

static void on_progress(void *user, uint64_t done, uint64_t total) {
    struct progress *p = user;
    CHECK(done >= p->last_done);
    p->calls++;
    p->last_done = done;
    p->last_total = total;
}

static void d8_progress_reaches_the_total_and_leases_keep_their_ttl(void) {
    char path[512], dest[512];
    tenure *db = open_pair("snap-progress.tenure", "snap-progress.copy", path, dest);
    int64_t lease = 0;
    CHECK_OK(tenure_lease_grant(db, 3600 * 1000, 0, &lease));
    CHECK_OK(tenure_put(db, S("a"), S("1"), lease, OUT_I64));
    CHECK_OK(tenure_put(db, S("b"), S("2"), 0, OUT_I64));
    struct progress p = {0, 0, 0};
    tenure_snapshot_info info;
    CHECK_OK(tenure_snapshot(db, dest, on_progress, &p, &info));
    CHECK(p.calls >= 1);
    CHECK_EQ(p.last_done, 3);
    CHECK_EQ(p.last_total, 3);
    CHECK_EQ(info.keys, 2);
    CHECK_EQ(info.leases, 1);
    CHECK_EQ(info.revision, 2);
    struct stat st;
    CHECK(stat(dest, &st) == 0);
    CHECK_EQ((uint64_t)st.st_size, info.bytes);
    tenure_close(db);
    tenure *copy = NULL;
    CHECK_OK(tenure_open(dest, NULL, &copy));
    int64_t of = 0;
    CHECK_OK(tenure_lease_of(copy, S("a"), &of));
    CHECK_EQ(of, lease);
    tenure_lease_info *li = NULL;
    CHECK_OK(tenure_lease_time_to_live(copy, lease, &li));
    CHECK_EQ(tenure_lease_info_ttl_ms(li), 3600 * 1000);
    CHECK(tenure_lease_info_remaining_ms(li) > 3500 * 1000);
    tenure_lease_info_free(li);
    tenure_close(copy);
}

static void d8_snapshot_errors_name_their_cause_and_leave_out_untouched(void) {
    char path[512], dest[512];
    tenure *db = open_pair("snap-errors.tenure", "no-such-dir/copy.tenure", path, dest);
    tenure_snapshot_info info;
    info.revision = -7;
    CHECK_RC(tenure_snapshot(NULL, dest, NULL, NULL, &info), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_snapshot(db, NULL, NULL, NULL, &info), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_snapshot(db, dest, NULL, NULL, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_snapshot(db, "", NULL, NULL, &info), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_snapshot(db, path, NULL, NULL, &info), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("the database itself");
    CHECK_RC(tenure_snapshot(db, dest, NULL, NULL, &info), TENURE_ERR_STORAGE);
    CHECK_MSG("no-such-dir/copy.tenure");
    CHECK(!exists(dest));
    CHECK_EQ(info.revision, -7);
    tenure *mem = open_memory(NULL);
    test_path(dest, sizeof dest, "snap-mem.tenure");
    CHECK_RC(tenure_snapshot(mem, dest, NULL, NULL, &info), TENURE_ERR_INVALID_ARGUMENT);
    CHECK(!exists(dest));
    tenure_close(mem);
    tenure_close(db);
}

void backup_tests(void) {
    RUN(d8_snapshot_while_threads_write_holds_exactly_the_writes_up_to_its_revision);
    RUN(d8_progress_reaches_the_total_and_leases_keep_their_ttl);
    RUN(d8_snapshot_errors_name_their_cause_and_leave_out_untouched);
}
