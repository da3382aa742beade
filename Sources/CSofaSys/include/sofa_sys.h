#ifndef SOFA_SYS_H
#define SOFA_SYS_H

#include <stdint.h>

/// Starts writing back the dirty pages of bytes [offset, offset + length) of `fd` without waiting for them
/// (Linux `sync_file_range` with `SYNC_FILE_RANGE_WRITE`): a hint that makes a later `fdatasync` shorter, never a
/// durability guarantee. Returns 0, or -1 with errno set; does nothing and returns 0 on other systems.
int sofa_start_writeback(int fd, int64_t offset, int64_t length);

/// Asks the CPU to start loading the cache line holding `address` for a read soon (a hint: it never faults, so
/// any address may be given). A scan that first touches each entry of a leaf far from the CPU caches names the
/// entry a few ahead, so that the loads overlap instead of each waiting in turn.
static inline void sofa_prefetch(const void *address) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(address, 0, 3);
#else
    (void)address;
#endif
}

/// The CPUs this process may run on (its affinity mask; at least 1): what a choice between spinning and
/// sleeping needs, rather than the CPUs online, which a container's or `taskset`'s limit does not change.
int sofa_cpus_allowed(void);

#endif
