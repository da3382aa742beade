/* sync-bytes: does the size of a small write change the cost of the fdatasync after it?
 *
 * Fills a 64 MiB file with zeros (so later writes land in allocated, written blocks, as Sofa's one-sync
 * commits do in their zero tail), then, for ROUNDS rounds, writes PER commits of each SIZE in turn at
 * increasing offsets, each followed by fdatasync, and prints each size's p50, mean and p90 in µs.
 *
 *   cc -O2 -o /tmp/sync-bytes Benchmarks/tools/sync-bytes.c
 *   /tmp/sync-bytes /tmp/sync-bytes.data 5 200 4000 7500 15000     (BENCHMARKS.md §3, "D2, fourth round")
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { MiB = 1 << 20, FILE_BYTES = 64 * MiB, MAX_SIZES = 16 };

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 5 || argc - 4 > MAX_SIZES) {
        fprintf(stderr, "usage: %s FILE ROUNDS PER SIZE...\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    int rounds = atoi(argv[2]), per = atoi(argv[3]), sizes = argc - 4;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror("open"); return 1; }
    char *zeros = calloc(1, MiB), *data = malloc(MiB);
    for (int i = 0; i < MiB; i++) data[i] = (char)rand();
    for (off_t o = 0; o < FILE_BYTES; o += MiB)
        if (pwrite(fd, zeros, MiB, o) != MiB) { perror("pwrite"); return 1; }
    if (fsync(fd) != 0) { perror("fsync"); return 1; }

    double *latency[MAX_SIZES];
    int count[MAX_SIZES] = {0};
    for (int v = 0; v < sizes; v++) latency[v] = malloc(sizeof(double) * rounds * per);
    off_t offset = 4096;
    for (int r = 0; r < rounds; r++) {
        for (int v = 0; v < sizes; v++) {
            int size = atoi(argv[4 + v]);
            for (int i = 0; i < per; i++) {
                double start = now_us();
                if (pwrite(fd, data, size, offset) != size || fdatasync(fd) != 0) { perror("write"); return 1; }
                latency[v][count[v]++] = now_us() - start;
                offset += size;
                if (offset + size > FILE_BYTES) offset = 4096;
            }
        }
    }
    for (int v = 0; v < sizes; v++) {
        qsort(latency[v], count[v], sizeof(double), by_value);
        double sum = 0;
        for (int i = 0; i < count[v]; i++) sum += latency[v][i];
        printf("%s bytes: p50 %.0f mean %.0f p90 %.0f µs\n", argv[4 + v], latency[v][count[v] / 2],
               sum / count[v], latency[v][count[v] * 9 / 10]);
    }
    close(fd);
    unlink(path);
    return 0;
}
