/* Runs every C test case of libtenure and prints `C tests: N passed, M failed`. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

atomic_int check_failures;
atomic_long check_count;

static int passed, failed;
static char dir[256];

tenure *open_memory(const tenure_clock *clock) {
    tenure_options o;
    tenure *db = NULL;
    CHECK_OK(tenure_options_init(&o));
    o.clock = clock;
    CHECK_OK(tenure_open(NULL, &o, &db));
    return db;
}

tenure_session *new_session(tenure *db) {
    tenure_session *s = NULL;
    CHECK_OK(tenure_session_new(db, 60000, &s));
    return s;
}

void end_session(tenure_session *s) {
    CHECK_OK(tenure_session_close(s));
    tenure_session_free(s);
}

const char *test_dir(void) { return dir; }

void test_path(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "%s/%s", dir, name);
}

void run_case(const char *name, test_fn fn) {
    atomic_store(&check_failures, 0);
    fn();
    if (atomic_load(&check_failures) == 0) {
        passed++;
    } else {
        failed++;
        fprintf(stderr, "FAILED: %s (%d failed checks)\n", name, atomic_load(&check_failures));
    }
}

static void remove_dir(void) {
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        char path[512];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

int main(int argc, char **argv) {
    if (argc > 0 && strchr(argv[0], '/') != NULL) test_binary = argv[0];
    /* test_shared.c starts this binary again as its other processes. */
    if (argc > 1 && strcmp(argv[1], "--shared-child") == 0) return shared_child_main(argc, argv);
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tenure-c-XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    api_tests();
    lease_tests();
    key_tests();
    txn_tests();
    history_tests();
    watch_tests();
    expiry_tests();
    file_tests();
    thread_tests();
    closed_tests();
    sync_tests();
    election_tests();
    message_tests();
    backup_tests();
    queue_tests();
    barrier_tests();
    group_tests();
    shared_tests();
    quota_tests();
    remove_dir();
    printf("(%ld checks)\n", atomic_load(&check_count));
    printf("C tests: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
