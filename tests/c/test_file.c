/* Files through the C API (SPEC L13, D4-D7): round trips, one owner, corrupt files, storage
 * errors, bad paths, and both recovery modes. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static tenure *open_file(const char *path, const tenure_options *o) {
    tenure *db = NULL;
    CHECK_OK(tenure_open(path, o, &db));
    return db;
}

static void a_file_round_trip_keeps_keys_leases_and_revisions(void) {
    char path[512];
    test_path(path, sizeof path, "round.tenure");
    tenure *db = open_file(path, NULL);
    CHECK(db != NULL);
    int64_t lease = 0, rev = 0;
    CHECK_OK(tenure_lease_grant(db, 3600 * 1000, 0, &lease));
    CHECK_OK(tenure_put(db, S("cfg/a"), S("alpha"), 0, OUT_I64));
    CHECK_OK(tenure_put(db, S("svc/x"), S("10.0.0.1"), lease, OUT_I64));
    tenure_txn *txn = NULL;
    tenure_txn_response *r = NULL;
    CHECK_OK(tenure_txn_new(&txn));
    CHECK_OK(tenure_txn_put(txn, true, S("cfg/b"), S("beta"), 0));
    CHECK_OK(tenure_txn_delete(txn, true, S("cfg/a")));
    CHECK_OK(tenure_txn_commit(db, txn, &r));
    tenure_txn_response_free(r);
    tenure_txn_free(txn);
    CHECK_OK(tenure_revision(db, &rev));
    CHECK_EQ(rev, 3);
    tenure_stats s;
    CHECK_OK(tenure_stats_read(db, &s));
    CHECK(s.commits >= 1);
    CHECK(s.fsyncs >= 1);
    tenure_close(db);

    db = open_file(path, NULL);
    int64_t rev2 = 0, of = 0;
    CHECK_OK(tenure_revision(db, &rev2));
    CHECK_EQ(rev2, rev);
    tenure_kv *kv = NULL;
    CHECK_OK(tenure_get(db, S("cfg/a"), &kv));
    CHECK(kv == NULL);
    CHECK_OK(tenure_get(db, S("cfg/b"), &kv));
    CHECK(bytes_eq(tenure_kv_value(kv), "beta"));
    tenure_kv_free(kv);
    CHECK_OK(tenure_get(db, S("svc/x"), &kv));
    CHECK(bytes_eq(tenure_kv_value(kv), "10.0.0.1"));
    CHECK_EQ(tenure_kv_lease(kv), lease);
    tenure_kv_free(kv);
    CHECK_OK(tenure_lease_of(db, S("svc/x"), &of));
    CHECK_EQ(of, lease);
    tenure_lease_info *info = NULL;
    CHECK_OK(tenure_lease_time_to_live(db, lease, &info));
    CHECK_EQ(tenure_lease_info_ttl_ms(info), 3600 * 1000);
    CHECK_EQ(tenure_lease_info_key_count(info), 1);
    tenure_lease_info_free(info);
    /* IDs are never reused across reopen. */
    int64_t next = 0;
    CHECK_OK(tenure_lease_grant(db, 1000, 0, &next));
    CHECK(next > lease);
    tenure_close(db);
}

static void a_second_open_of_the_same_file_is_already_open(void) {
    char path[512];
    test_path(path, sizeof path, "owner.tenure");
    tenure *db = open_file(path, NULL);
    tenure *second = (tenure *)1;
    CHECK_RC(tenure_open(path, NULL, &second), TENURE_ERR_ALREADY_OPEN);
    CHECK_MSG(path);
    CHECK(second == (tenure *)1);
    tenure_close(db);
    /* Close releases the file. */
    second = NULL;
    CHECK_OK(tenure_open(path, NULL, &second));
    tenure_close(second);
}

static void a_file_that_is_not_a_database_is_corrupt_and_left_untouched(void) {
    char path[512];
    const char text[] = "this is not a tenure database\n";
    test_path(path, sizeof path, "notes.txt");
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    fwrite(text, 1, sizeof text - 1, f);
    fclose(f);
    tenure *db = NULL;
    CHECK_RC(tenure_open(path, NULL, &db), TENURE_ERR_CORRUPT);
    CHECK_MSG(path);
    CHECK(db == NULL);
    char buf[128] = {0};
    f = fopen(path, "rb");
    CHECK(f != NULL);
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    CHECK_EQ(n, sizeof text - 1);
    CHECK(memcmp(buf, text, sizeof text - 1) == 0);
}

static void a_path_in_a_missing_directory_is_a_storage_error(void) {
    char path[512];
    test_path(path, sizeof path, "missing-dir/db.tenure");
    tenure *db = NULL;
    CHECK_RC(tenure_open(path, NULL, &db), TENURE_ERR_STORAGE);
    CHECK_MSG("missing-dir");
    CHECK(db == NULL);
}

static void paths_must_be_non_empty_utf8(void) {
    char path[512];
    char bad[512];
    test_path(bad, sizeof bad, "\xff\xfe.tenure"); /* invalid UTF-8 */
    tenure *db = NULL;
    CHECK_RC(tenure_open(bad, NULL, &db), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("UTF-8");
    CHECK(db == NULL);
    CHECK(!exists(bad)); /* nothing was created */
    CHECK_RC(tenure_open("\xc3\x28", NULL, &db), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_open("", NULL, &db), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("empty");
    /* Valid non-ASCII UTF-8 is fine. */
    test_path(path, sizeof path, "caf\xc3\xa9.tenure");
    CHECK_OK(tenure_open(path, NULL, &db));
    tenure_close(db);
    CHECK(exists(path));
}

static void wall_recovery_ages_leases_by_the_wall_time_since_persisting(void) {
    char path[512];
    test_path(path, sizeof path, "wall.tenure");
    tenure_clock *clock = NULL;
    tenure_options o;
    CHECK_OK(tenure_clock_manual_new(&clock));
    tenure_options_init(&o);
    o.clock = clock;
    tenure *db = open_file(path, &o);
    int64_t keep = 0, gone = 0;
    CHECK_OK(tenure_lease_grant(db, 10000, 0, &keep));
    CHECK_OK(tenure_lease_grant(db, 3000, 0, &gone));
    CHECK_OK(tenure_put(db, S("gone/k"), S("v"), gone, OUT_I64));
    tenure_close(db);

    /* 4 s of wall time pass while the database is closed. */
    CHECK_OK(tenure_clock_step_wall(clock, 4000));
    db = open_file(path, &o);
    tenure_lease_info *info = NULL;
    CHECK_OK(tenure_lease_time_to_live(db, keep, &info));
    CHECK_EQ(tenure_lease_info_remaining_ms(info), 6000);
    tenure_lease_info_free(info);
    /* The other one was past its deadline: it expires right after open, with its keys. */
    tenure_expired *e = NULL;
    CHECK_OK(tenure_expired_next(db, WAIT_MS, &e));
    CHECK_EQ(tenure_expired_len(e), 1);
    CHECK_EQ(tenure_expired_id(e, 0), gone);
    CHECK(bytes_eq(tenure_expired_key(e, 0, 0), "gone/k"));
    tenure_expired_free(e);
    tenure_kv *kv = (tenure_kv *)1;
    CHECK_OK(tenure_get(db, S("gone/k"), &kv));
    CHECK(kv == NULL);
    tenure_close(db);
    tenure_clock_free(clock);
}

static void extend_recovery_restarts_from_the_checkpoint_plus_extend(void) {
    char path[512];
    test_path(path, sizeof path, "extend.tenure");
    tenure_clock *clock = NULL;
    tenure_options o;
    CHECK_OK(tenure_clock_manual_new(&clock));
    tenure_options_init(&o);
    o.clock = clock;
    tenure *db = open_file(path, &o);
    int64_t a = 0, b = 0;
    CHECK_OK(tenure_lease_grant(db, 10000, 0, &a));
    CHECK_OK(tenure_lease_grant(db, 8000, 0, &b));
    CHECK_OK(tenure_lease_checkpoint(db, a, 2000));
    tenure_close(db);

    CHECK_OK(tenure_clock_step_wall(clock, 60000)); /* ignored by extend recovery */
    o.recovery = TENURE_RECOVERY_EXTEND;
    o.extend_ms = 500;
    db = open_file(path, &o);
    tenure_lease_info *info = NULL;
    CHECK_OK(tenure_lease_time_to_live(db, a, &info));
    CHECK_EQ(tenure_lease_info_remaining_ms(info), 2500);
    tenure_lease_info_free(info);
    CHECK_OK(tenure_lease_time_to_live(db, b, &info));
    CHECK_EQ(tenure_lease_info_remaining_ms(info), 8500);
    tenure_lease_info_free(info);
    tenure_close(db);
    tenure_clock_free(clock);
}

static void buffered_durability_flushes_on_close(void) {
    char path[512];
    test_path(path, sizeof path, "buffered.tenure");
    tenure_options o;
    tenure_options_init(&o);
    o.durability = TENURE_DURABILITY_BUFFERED;
    o.flush_interval_ms = 50;
    tenure *db = open_file(path, &o);
    for (int i = 0; i < 20; i++) CHECK_OK(tenure_put(db, S("b"), S("v"), 0, OUT_I64));
    tenure_close(db);
    db = open_file(path, NULL);
    int64_t rev = 0;
    CHECK_OK(tenure_revision(db, &rev));
    CHECK_EQ(rev, 20);
    tenure_close(db);
}

void file_tests(void) {
    RUN(a_file_round_trip_keeps_keys_leases_and_revisions);
    RUN(a_second_open_of_the_same_file_is_already_open);
    RUN(a_file_that_is_not_a_database_is_corrupt_and_left_untouched);
    RUN(a_path_in_a_missing_directory_is_a_storage_error);
    RUN(paths_must_be_non_empty_utf8);
    RUN(wall_recovery_ages_leases_by_the_wall_time_since_persisting);
    RUN(extend_recovery_restarts_from_the_checkpoint_plus_extend);
    RUN(buffered_durability_flushes_on_close);
}
