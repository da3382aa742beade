// System calls Swift's Glibc module does not expose (they need _GNU_SOURCE).
#define _GNU_SOURCE
#include "sofa_sys.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

int sofa_start_writeback(int fd, int64_t offset, int64_t length) {
#if defined(__linux__)
    return sync_file_range(fd, (off64_t)offset, (off64_t)length, SYNC_FILE_RANGE_WRITE);
#else
    (void)fd;
    (void)offset;
    (void)length;
    return 0;
#endif
}

int sofa_cpus_allowed(void) {
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int count = CPU_COUNT(&set);
        return count > 0 ? count : 1;
    }
#endif
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int)online : 1;
}
