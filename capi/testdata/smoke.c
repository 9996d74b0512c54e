/* Drives libffrecord through its C ABI from real C threads.
 * usage: smoke <version> <ffr file> <output ffr file>
 * Reads every sample of the file in one batch and writes them to a new file through the
 * writer; prints one line per check passed and exits non-zero at the first failure. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ffrecord.h"

#define CHECK(cond, ...)                                      \
    do {                                                      \
        if (!(cond)) {                                        \
            fprintf(stderr, "FAIL line %d: ", __LINE__);      \
            fprintf(stderr, __VA_ARGS__);                     \
            fputc('\n', stderr);                              \
            exit(1);                                          \
        }                                                     \
    } while (0)

static pthread_barrier_t all_failed;

/* Each thread fails with its own bad handle, waits until every thread has failed, then
 * checks that its message names its own handle. */
static void *fail_and_read_message(void *arg) {
    int64_t bad = (int64_t)(intptr_t)arg;
    uint64_t n;
    int32_t st = ffr_reader_len(bad, &n);
    pthread_barrier_wait(&all_failed);
    char msg[256], want[64];
    size_t len = 0;
    int32_t got = ffr_errmsg(msg, sizeof msg, &len);
    snprintf(want, sizeof want, "%lld is not a reader handle", (long long)bad);
    if (st != FFR_E_HANDLE || got != FFR_OK || len == 0 || strstr(msg, want) == NULL) {
        fprintf(stderr, "thread %lld: status %d, message '%s'\n", (long long)bad, st, msg);
        return (void *)1;
    }
    return NULL;
}

int main(int argc, char **argv) {
    CHECK(argc == 4, "usage: smoke <version> <ffr file> <output ffr file>");
    char version[32];
    int32_t abi = 0;
    CHECK(ffr_version(version, sizeof version, &abi) == FFR_OK && abi == FFR_ABI_VERSION, "ABI version");
    CHECK(strcmp(version, argv[1]) == 0, "version '%s', want '%s'", version, argv[1]);
    puts("version ok");

    const char *paths[] = {argv[2]};
    int64_t h;
    CHECK(ffr_reader_open(paths, 1, FFR_CHECK_DATA, &h) == FFR_OK, "open");
    uint64_t n, open_handles;
    CHECK(ffr_reader_len(h, &n) == FFR_OK, "len");
    CHECK(ffr_open_handles(&open_handles) == FFR_OK && open_handles == 1, "one open handle");

    uint64_t *indices = malloc(n * sizeof *indices), *sizes = malloc(n * sizeof *sizes);
    for (uint64_t i = 0; i < n; i++) indices[i] = i;
    CHECK(ffr_reader_sizes(h, indices, n, sizes) == FFR_OK, "sizes");
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) total += sizes[i];
    char *data = malloc(total ? total : 1);
    CHECK(ffr_reader_read_batch(h, indices, n, data, total - 1, sizes) == FFR_E_SHORTBUF, "short buffer");
    size_t msg_len = 0;
    CHECK(ffr_errmsg(NULL, 0, &msg_len) == FFR_E_SHORTBUF && msg_len > 0, "short buffer message");
    CHECK(ffr_reader_read_batch(h, indices, n, data, total, sizes) == FFR_OK, "read");
    printf("read %llu samples, %llu bytes\n", (unsigned long long)n, (unsigned long long)total);

    uint64_t info[FFR_INFO_FIELDS], bad[4], nbad = 99, next = 0;
    int32_t reasons[4];
    char text[1024];
    CHECK(ffr_reader_file_info(h, 0, info, FFR_INFO_FIELDS) == FFR_OK, "file info");
    CHECK(info[FFR_INFO_SAMPLES] == n && info[FFR_INFO_METADATA] == FFR_METADATA_INTACT, "info fields");
    CHECK(ffr_reader_verify(h, 0, n, bad, reasons, 4, text, sizeof text, &nbad, &next) == FFR_OK, "verify");
    CHECK(nbad == 0 && next == n, "verify: %llu bad, next %llu", (unsigned long long)nbad, (unsigned long long)next);
    CHECK(ffr_reader_verify(h, 1, UINT64_MAX, bad, reasons, 4, NULL, 0, &nbad, &next) == FFR_E_INDEX,
          "verify past the end");
    puts("verify ok");

    int64_t w;
    CHECK(ffr_writer_create(argv[3], n, FFR_COMPRESS_NONE, &w) == FFR_OK, "create");
    CHECK(ffr_writer_create(argv[3], n, FFR_COMPRESS_NONE, NULL) == FFR_E_INVALID, "NULL handle");
    CHECK(ffr_errmsg(NULL, 0, &msg_len) == FFR_E_SHORTBUF && msg_len > 0, "NULL handle message");
    const char *sample = data;
    for (uint64_t i = 0; i < n; sample += sizes[i++])
        CHECK(ffr_writer_write(w, sample, sizes[i]) == FFR_OK, "write sample %llu", (unsigned long long)i);
    uint64_t written;
    CHECK(ffr_writer_count(w, &written) == FFR_OK && written == n, "count");
    CHECK(ffr_writer_write(w, data, 1) == FFR_E_INVALID, "write past n");
    CHECK(ffr_writer_close(w) == FFR_OK, "writer close");
    CHECK(ffr_writer_close(w) == FFR_OK, "second writer close");
    CHECK(ffr_writer_abort(w) == FFR_OK, "abort after close");
    CHECK(ffr_writer_count(w, &written) == FFR_E_CLOSED, "closed writer");
    puts("write ok");

    enum { THREADS = 8 };
    pthread_t threads[THREADS];
    pthread_barrier_init(&all_failed, NULL, THREADS);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&threads[i], NULL, fail_and_read_message, (void *)(intptr_t)(1000 + 2 * i));
    for (int i = 0; i < THREADS; i++) {
        void *bad;
        pthread_join(threads[i], &bad);
        CHECK(bad == NULL, "thread %d", i);
    }
    puts("per-thread errors ok");

    CHECK(ffr_reader_close(h) == FFR_OK, "close");
    CHECK(ffr_reader_close(h) == FFR_OK, "second close");
    CHECK(ffr_reader_len(h, &n) == FFR_E_CLOSED, "closed handle");
    CHECK(ffr_open_handles(&open_handles) == FFR_OK && open_handles == 0, "no open handle");
    puts("handles ok");

    const char *missing[] = {"/nonexistent-ffrecord-dir/x.ffr"};
    CHECK(ffr_reader_open(missing, 1, 0, &h) == FFR_E_NOTFOUND, "missing file");
    int32_t os_errno = 0;
    char path[64];
    size_t path_len = 0;
    CHECK(ffr_oserror(&os_errno, path, sizeof path, &path_len) == FFR_OK, "oserror");
    CHECK(os_errno == ENOENT && strcmp(path, missing[0]) == 0, "errno %d, path '%s'", os_errno, path);
    puts("errno ok");
    free(indices), free(sizes), free(data);
    return 0;
}
