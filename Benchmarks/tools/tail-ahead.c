/* tail-ahead: what small durable commits pay when the file's zero tail is written on the commit path or ahead
 * of need on another thread (BENCHMARKS.md §3, "D2, sixth round").
 *
 * Each commit: CPU_US of busy work (the commit's CPU), pwrite SIZE bytes at the file's end as committed, then
 * fdatasync. The file grows by a 1 MiB zero tail:
 *   MODE 0  on the commit path: a commit that reaches the tail's end also writes 1 MiB of zeros after itself
 *           (Sofa before the sixth round);
 *   MODE 1  on another thread, through its own descriptor: when less than LOW KiB of tail is left after a
 *           commit, pwrite zeros up to the commit's end + 1 MiB, then fdatasync (ZeroTailExtender);
 *   MODE 2  as 1, with sync_file_range(WAIT_BEFORE|WRITE|WAIT_AFTER) of the zeros before the fdatasync;
 *   MODE 3  as 1, through an O_DIRECT descriptor;
 *   MODE 4  as 1, in 64 KiB pieces, each followed by sync_file_range(WAIT_BEFORE|WRITE|WAIT_AFTER).
 * A commit that reaches an extension still running waits for it. Prints the commits' latency percentiles.
 *
 *   cc -O2 -pthread -o /tmp/tail-ahead Benchmarks/tools/tail-ahead.c
 *   /tmp/tail-ahead /tmp/tail-ahead.data MODE COMMITS SIZE [LOW_KIB [CPU_US]]   e.g. 1 1500 13000 512 60
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <stdatomic.h>

enum { MiB = 1 << 20, STEP = MiB }; static long long LOW = 512 << 10; static double CPU_US = 0;
static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static const char *path; static int mode; /* 0 inline 1 bg-sync 2 bg-range 3 bg-direct 4 bg-chunks */
static int wfd, bfd; static char *zeros;
static atomic_llong prepared; static atomic_llong committedEnd;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int requested, busy, quit; static double bgTime; static int bgCount;

static void *bg(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&mu);
    while (!requested && !quit) pthread_cond_wait(&cv, &mu);
    if (quit) { pthread_mutex_unlock(&mu); return NULL; }
    requested = 0; busy = 1; pthread_mutex_unlock(&mu);
    double t0 = now_us();
    long long from = atomic_load(&prepared);
    long long to = (atomic_load(&committedEnd) + STEP) / 4096 * 4096;
    if (to > from) {
      if (mode == 4) {
        for (long long o = from; o < to; o += 65536) {
          long long n = to - o < 65536 ? to - o : 65536;
          if (pwrite(bfd, zeros, n, o) != n) { perror("bg pwrite"); exit(1); }
          sync_file_range(bfd, o, n, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
        }
      } else {
        if (pwrite(bfd, zeros, to - from, from) != to - from) { perror("bg pwrite"); exit(1); }
        if (mode == 2)
          sync_file_range(bfd, from, to - from,
                          SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
      }
      if (fdatasync(bfd) != 0) { perror("bg fdatasync"); exit(1); }
      atomic_store(&prepared, to);
    }
    bgTime += now_us() - t0; bgCount++;
    pthread_mutex_lock(&mu); busy = 0; pthread_cond_broadcast(&cv); pthread_mutex_unlock(&mu);
  }
}

int main(int argc, char **argv) {
  if (argc < 5) { fprintf(stderr, "usage: %s FILE MODE COMMITS SIZE [LOW_KIB [CPU_US]]\n", argv[0]); return 2; }
  path = argv[1];
  mode = atoi(argv[2]);
  if (argc > 5) LOW = atoll(argv[5]) << 10;
  if (argc > 6) CPU_US = atof(argv[6]);
  int commits = atoi(argv[3]), size = atoi(argv[4]);
  wfd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (wfd < 0) { perror("open"); return 1; }
  bfd = open(path, O_RDWR | (mode == 3 ? O_DIRECT : 0));
  if (posix_memalign((void **)&zeros, 4096, 2 * MiB)) return 1;
  memset(zeros, 0, 2 * MiB);
  char *data = malloc(size); for (int i = 0; i < size; i++) data[i] = (char)(rand() | 1);
  long long end = 4096; if (pwrite(wfd, data, 4096, 0) != 4096) return 1; fdatasync(wfd);
  atomic_store(&prepared, end); atomic_store(&committedEnd, end); long long allocated = end;
  pthread_t th; if (mode) pthread_create(&th, NULL, bg, NULL);
  double *lat = malloc(sizeof(double) * commits); int waits = 0, inl = 0;
  for (int i = 0; i < commits; i++) {
    { double c0 = now_us(); while (now_us() - c0 < CPU_US) {} }
    double t0 = now_us();
    long long ce = end + size;
    if (mode) {
      if (ce > atomic_load(&prepared)) {
        pthread_mutex_lock(&mu);
        if (busy || requested) {
          waits++;
          while (busy || requested) pthread_cond_wait(&cv, &mu);
        }
        pthread_mutex_unlock(&mu);
      }
      if (ce > atomic_load(&prepared)) { inl++; } 
      if (pwrite(wfd, data, size, end) != size) return 1;
      if (ce > atomic_load(&prepared)) { /* inline fallback */
        long long to = (ce + STEP) / 4096 * 4096;
        if (pwrite(wfd, zeros, to - ce, ce) != to - ce) return 1;
        atomic_store(&prepared, to);
      }
    } else {
      if (pwrite(wfd, data, size, end) != size) return 1;
      if (ce > allocated) {
        long long to = (ce + STEP) / 4096 * 4096;
        if (pwrite(wfd, zeros, to - ce, ce) != to - ce) return 1;
        allocated = to;
      }
    }
    if (fdatasync(wfd) != 0) return 1;
    end = ce; atomic_store(&committedEnd, end);
    if (mode && atomic_load(&prepared) - end < LOW) {
      pthread_mutex_lock(&mu);
      if (!busy && !requested) {
        requested = 1;
        pthread_cond_signal(&cv);
      }
      pthread_mutex_unlock(&mu);
    }
    lat[i] = now_us() - t0;
  }
  if (mode) {
    pthread_mutex_lock(&mu);
    quit = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(th, NULL);
  }
  double sum = 0; for (int i = 0; i < commits; i++) sum += lat[i];
  qsort(lat, commits, sizeof(double), by_value);
  printf("mode %d: p50 %.0f p90 %.0f p99 %.0f p99.9 %.0f mean %.1f µs; ", mode, lat[commits / 2],
         lat[commits * 9 / 10], lat[commits * 99 / 100], lat[commits * 999 / 1000], sum / commits);
  printf("waits %d inline %d; bg %d ext, %.0f µs each\n", waits, inl, bgCount, bgCount ? bgTime / bgCount : 0);
  close(wfd); close(bfd); unlink(path); return 0;
}
