/* Revision history through the C API (SPEC K9, K10, K13, K14): reads at a past revision
 * answer what the key was then (tenure_get_at, tenure_range_with's `revision`), compaction
 * keeps its own revision (physical or not), the compacted (with its compaction revision) and
 * future errors, and a watch from a past revision after a reopen. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* A new file-backed engine: an in-memory one keeps only the present (K9). */
static tenure *open_file(const char *name) {
    char path[512];
    test_path(path, sizeof path, name);
    tenure *db = NULL;
    CHECK_OK(tenure_open(path, NULL, &db));
    return db;
}

/* tenure_range_with at `revision` with `limit`. */
static tenure_result range_at(tenure *db, const uint8_t *prefix, size_t prefix_len, size_t limit,
                              int64_t revision, tenure_kv_list **out) {
    tenure_range_options opts = {0};
    opts.limit = limit;
    opts.revision = revision;
    return tenure_range_with(db, prefix, prefix_len, &opts, out);
}

/* k=v1 (1), k=v2 with `lease` (2), other=o (3), delete k (4). */
static void write_history(tenure *db, int64_t lease) {
    int64_t r = 0;
    CHECK_OK(tenure_put(db, S("k"), S("v1"), 0, &r));
    CHECK_EQ(r, 1);
    CHECK_OK(tenure_put(db, S("k"), S("v2"), lease, &r));
    CHECK_EQ(r, 2);
    CHECK_OK(tenure_put(db, S("other"), S("o"), 0, &r));
    CHECK_EQ(r, 3);
    bool deleted = false;
    CHECK_OK(tenure_delete(db, S("k"), &deleted));
    CHECK(deleted);
}

static void get_at_answers_the_key_as_it_was_at_each_revision(void) {
    tenure *db = open_file("get_at.tenure");
    int64_t lease = 0;
    CHECK_OK(tenure_lease_grant(db, 600000, 0, &lease));
    write_history(db, lease);

    tenure_kv *kv = NULL;
    CHECK_OK(tenure_get_at(db, S("k"), 1, &kv));
    CHECK(kv != NULL);
    CHECK(bytes_eq(tenure_kv_value(kv), "v1"));
    CHECK_EQ(tenure_kv_create_revision(kv), 1);
    CHECK_EQ(tenure_kv_mod_revision(kv), 1);
    CHECK_EQ(tenure_kv_version(kv), 1);
    CHECK_EQ(tenure_kv_lease(kv), 0);
    tenure_kv_free(kv);

    CHECK_OK(tenure_get_at(db, S("k"), 3, &kv));
    CHECK(kv != NULL);
    CHECK(bytes_eq(tenure_kv_value(kv), "v2"));
    CHECK_EQ(tenure_kv_create_revision(kv), 1);
    CHECK_EQ(tenure_kv_mod_revision(kv), 2);
    CHECK_EQ(tenure_kv_version(kv), 2);
    CHECK_EQ(tenure_kv_lease(kv), lease);
    tenure_kv_free(kv);

    /* Deleted at 4: absent then and now (0 is the current revision). */
    kv = (tenure_kv *)1;
    CHECK_OK(tenure_get_at(db, S("k"), 4, &kv));
    CHECK(kv == NULL);
    kv = (tenure_kv *)1;
    CHECK_OK(tenure_get_at(db, S("k"), 0, &kv));
    CHECK(kv == NULL);
    /* Not yet written at 2. */
    kv = (tenure_kv *)1;
    CHECK_OK(tenure_get_at(db, S("other"), 2, &kv));
    CHECK(kv == NULL);
    tenure_close(db);
}

static void range_at_lists_the_keys_of_then_with_a_limit(void) {
    tenure *db = open_file("range_at.tenure");
    write_history(db, 0);
    tenure_kv_list *list = NULL;
    CHECK_OK(range_at(db, S(""), 0, 2, &list));
    CHECK_EQ(tenure_kv_list_len(list), 1);
    CHECK(bytes_eq(tenure_kv_value(tenure_kv_list_get(list, 0)), "v2"));
    tenure_kv_list_free(list);

    CHECK_OK(range_at(db, S(""), 0, 3, &list));
    CHECK_EQ(tenure_kv_list_len(list), 2);
    CHECK(bytes_eq(tenure_kv_key(tenure_kv_list_get(list, 0)), "k"));
    CHECK(bytes_eq(tenure_kv_key(tenure_kv_list_get(list, 1)), "other"));
    tenure_kv_list_free(list);

    CHECK_OK(range_at(db, S(""), 1, 3, &list));
    CHECK_EQ(tenure_kv_list_len(list), 1);
    CHECK(bytes_eq(tenure_kv_key(tenure_kv_list_get(list, 0)), "k"));
    tenure_kv_list_free(list);

    CHECK_OK(range_at(db, S("k"), 0, 4, &list));
    CHECK_EQ(tenure_kv_list_len(list), 0);
    tenure_kv_list_free(list);
    tenure_close(db);
}

static void k13_future_revisions_are_their_own_error_and_write_nothing(void) {
    tenure *db = open_file("future.tenure");
    write_history(db, 0);
    tenure_kv *kv = (tenure_kv *)1;
    CHECK_RC(tenure_get_at(db, S("k"), 5, &kv), TENURE_ERR_FUTURE_REVISION);
    CHECK_EQ(TENURE_ERR_FUTURE_REVISION, 23);
    CHECK(strcmp(tenure_result_str(TENURE_ERR_FUTURE_REVISION), "TENURE_ERR_FUTURE_REVISION") ==
          0);
    CHECK_MSG("required revision is a future revision: revision 5, the current one is 4");
    CHECK_EQ(tenure_last_error_compact_revision(), 0);
    CHECK(kv == (tenure_kv *)1);
    tenure_kv_list *list = (tenure_kv_list *)1;
    CHECK_RC(range_at(db, S(""), 0, 99, &list), TENURE_ERR_FUTURE_REVISION);
    CHECK_MSG("required revision is a future revision");
    CHECK(list == (tenure_kv_list *)1);
    CHECK_RC(tenure_get_at(db, S("k"), -1, &kv), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_MSG("negative");
    CHECK_RC(range_at(db, S(""), 0, -1, &list), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_compact(db, 5, false), TENURE_ERR_FUTURE_REVISION);
    CHECK_MSG("required revision is a future revision");
    CHECK_RC(tenure_compact(db, 5, true), TENURE_ERR_FUTURE_REVISION);
    CHECK_RC(tenure_compact(db, 0, false), TENURE_ERR_INVALID_ARGUMENT);
    CHECK_RC(tenure_get_at(NULL, S("k"), 1, &kv), TENURE_ERR_NULL_POINTER);
    CHECK_RC(range_at(db, S(""), 0, 1, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_compact(NULL, 1, false), TENURE_ERR_NULL_POINTER);
    int64_t rev = 0;
    CHECK_OK(tenure_revision(db, &rev));
    CHECK_EQ(rev, 4);
    tenure_close(db);
}

static void compaction_keeps_its_own_revision_and_refuses_below(void) {
    tenure *db = open_file("compact.tenure");
    write_history(db, 0);
    CHECK_OK(tenure_compact(db, 2, false));
    tenure_kv *kv = NULL;
    CHECK_OK(tenure_get_at(db, S("k"), 2, &kv));
    CHECK(kv != NULL);
    CHECK(bytes_eq(tenure_kv_value(kv), "v2"));
    tenure_kv_free(kv);

    kv = (tenure_kv *)1;
    CHECK_RC(tenure_get_at(db, S("k"), 1, &kv), TENURE_ERR_COMPACTED);
    CHECK_MSG("required revision has been compacted");
    CHECK_EQ(tenure_last_error_compact_revision(), 2);
    CHECK(kv == (tenure_kv *)1);
    tenure_kv_list *list = (tenure_kv_list *)1;
    CHECK_RC(range_at(db, S(""), 0, 1, &list), TENURE_ERR_COMPACTED);
    CHECK_EQ(tenure_last_error_compact_revision(), 2);
    CHECK(list == (tenure_kv_list *)1);
    /* A second compaction at or below the first is refused as etcd refuses it. */
    CHECK_RC(tenure_compact(db, 2, false), TENURE_ERR_COMPACTED);
    CHECK_EQ(tenure_last_error_compact_revision(), 2);
    CHECK_RC(tenure_compact(db, 1, true), TENURE_ERR_COMPACTED);
    /* Another failure clears it. */
    CHECK_RC(tenure_get_at(db, S("k"), 9, &kv), TENURE_ERR_FUTURE_REVISION);
    CHECK_EQ(tenure_last_error_compact_revision(), 0);

    /* A watch from the compacted revision replays 2, 3, 4; from below it is refused. */
    tenure_watcher *w = NULL;
    CHECK_OK(tenure_watch(db, S(""), TENURE_WATCH_PREFIX, 2, &w));
    int64_t want[] = {2, 3, 4};
    for (size_t i = 0; i < 3; i++) {
        tenure_event *ev = NULL;
        CHECK_OK(tenure_watcher_next(w, WAIT_MS, &ev));
        CHECK_EQ(tenure_event_revision(ev), want[i]);
        tenure_event_free(ev);
    }
    tenure_watcher_free(w);
    w = NULL;
    CHECK_RC(tenure_watch(db, S(""), TENURE_WATCH_PREFIX, 1, &w), TENURE_ERR_COMPACTED);
    CHECK_EQ(tenure_last_error_compact_revision(), 2);
    CHECK(w == NULL);
    tenure_close(db);
}

static void k14_a_physical_compaction_returns_once_carried_out(void) {
    tenure *db = open_file("physical.tenure");
    char value[512];
    memset(value, 'x', sizeof value);
    int64_t rev = 0;
    for (int i = 0; i < 2000; i++) {
        char key[8];
        int n = snprintf(key, sizeof key, "k%d", i % 10);
        CHECK_OK(tenure_put(db, (const uint8_t *)key, (size_t)n, (const uint8_t *)value,
                            sizeof value, 0, &rev));
    }
    /* The C API has no storage size: the Rust K14 test checks the rows are gone on return;
     * here, that the call carries the compaction out and answers as the logical one. */
    CHECK_OK(tenure_compact(db, rev - 1, true));
    tenure_kv *kv = NULL;
    CHECK_OK(tenure_get_at(db, S("k9"), rev - 1, &kv));
    CHECK(kv != NULL);
    tenure_kv_free(kv);
    kv = (tenure_kv *)1;
    CHECK_RC(tenure_get_at(db, S("k9"), rev - 2, &kv), TENURE_ERR_COMPACTED);
    CHECK_EQ(tenure_last_error_compact_revision(), rev - 1);
    CHECK_OK(tenure_compact(db, rev, true));
    CHECK_RC(tenure_compact(db, rev, true), TENURE_ERR_COMPACTED);
    tenure_close(db);
}

static void range_options_default_to_the_latest_without_a_limit(void) {
    tenure *db = open_file("range_opts.tenure");
    write_history(db, 0);
    tenure_kv_list *list = NULL;
    /* NULL options: every default, as tenure_range. */
    CHECK_OK(tenure_range_with(db, S(""), NULL, &list));
    CHECK_EQ(tenure_kv_list_len(list), 1);
    CHECK(bytes_eq(tenure_kv_key(tenure_kv_list_get(list, 0)), "other"));
    tenure_kv_list_free(list);
    /* A zero-initialised struct: the same. */
    tenure_range_options opts = {0};
    CHECK_OK(tenure_range_with(db, S(""), &opts, &list));
    CHECK_EQ(tenure_kv_list_len(list), 1);
    tenure_kv_list_free(list);
    opts.revision = 3;
    CHECK_OK(tenure_range_with(db, S(""), &opts, &list));
    CHECK_EQ(tenure_kv_list_len(list), 2);
    tenure_kv_list_free(list);
    CHECK_RC(tenure_range_with(db, S(""), &opts, NULL), TENURE_ERR_NULL_POINTER);
    CHECK_RC(tenure_range_with(NULL, S(""), &opts, &list), TENURE_ERR_NULL_POINTER);
    tenure_close(db);
}

static void history_and_a_watch_from_the_past_survive_a_reopen(void) {
    char path[512];
    test_path(path, sizeof path, "history.tenure");
    tenure *db = NULL;
    CHECK_OK(tenure_open(path, NULL, &db));
    write_history(db, 0);
    tenure_close(db);

    CHECK_OK(tenure_open(path, NULL, &db));
    tenure_kv *kv = NULL;
    CHECK_OK(tenure_get_at(db, S("k"), 1, &kv));
    CHECK(kv != NULL);
    CHECK(bytes_eq(tenure_kv_value(kv), "v1"));
    tenure_kv_free(kv);

    tenure_watcher *w = NULL;
    CHECK_OK(tenure_watch(db, S("k"), 0, 2, &w));
    tenure_event *ev = NULL;
    CHECK_OK(tenure_watcher_next(w, WAIT_MS, &ev));
    CHECK_EQ(tenure_event_type(ev), TENURE_EVENT_PUT);
    CHECK_EQ(tenure_event_revision(ev), 2);
    CHECK(bytes_eq(tenure_kv_value(tenure_event_kv(ev)), "v2"));
    tenure_event_free(ev);
    CHECK_OK(tenure_watcher_next(w, WAIT_MS, &ev));
    CHECK_EQ(tenure_event_type(ev), TENURE_EVENT_DELETE);
    CHECK_EQ(tenure_event_revision(ev), 4);
    tenure_event_free(ev);
    tenure_watcher_free(w);
    tenure_close(db);
}

static void an_in_memory_engine_keeps_only_the_present(void) {
    tenure *db = open_memory(NULL);
    write_history(db, 0);
    tenure_kv *kv = (tenure_kv *)1;
    CHECK_RC(tenure_get_at(db, S("k"), 2, &kv), TENURE_ERR_COMPACTED);
    CHECK(kv == (tenure_kv *)1);
    tenure_kv_list *list = NULL;
    CHECK_OK(range_at(db, S(""), 0, 4, &list));
    CHECK_EQ(tenure_kv_list_len(list), 1);
    tenure_kv_list_free(list);
    tenure_close(db);
}

void history_tests(void) {
    RUN(an_in_memory_engine_keeps_only_the_present);
    RUN(get_at_answers_the_key_as_it_was_at_each_revision);
    RUN(range_at_lists_the_keys_of_then_with_a_limit);
    RUN(k13_future_revisions_are_their_own_error_and_write_nothing);
    RUN(compaction_keeps_its_own_revision_and_refuses_below);
    RUN(k14_a_physical_compaction_returns_once_carried_out);
    RUN(range_options_default_to_the_latest_without_a_limit);
    RUN(history_and_a_watch_from_the_past_survive_a_reopen);
}
