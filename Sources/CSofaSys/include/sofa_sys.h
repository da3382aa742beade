#ifndef SOFA_SYS_H
#define SOFA_SYS_H

#include <stdint.h>

/// Starts writing back the dirty pages of bytes [offset, offset + length) of `fd` without waiting for them
/// (Linux `sync_file_range` with `SYNC_FILE_RANGE_WRITE`): a hint that makes a later `fdatasync` shorter, never a
/// durability guarantee. Returns 0, or -1 with errno set; does nothing and returns 0 on other systems.
int sofa_start_writeback(int fd, int64_t offset, int64_t length);

#endif
