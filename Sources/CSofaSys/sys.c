// System calls Swift's Glibc module does not expose (they need _GNU_SOURCE).
#define _GNU_SOURCE
#include "sofa_sys.h"

#include <fcntl.h>

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
