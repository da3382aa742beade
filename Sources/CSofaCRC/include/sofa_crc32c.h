#ifndef SOFA_CRC32C_H
#define SOFA_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/// CRC32C (Castagnoli, reflected polynomial 0x82F63B78) of `length` bytes, continuing from `crc`.
/// Start with crc = 0. Uses the SSE4.2 `crc32` instruction when the CPU has it, a table otherwise;
/// both give the same result (checked by the tests against known vectors).
uint32_t sofa_crc32c(uint32_t crc, const void *data, size_t length);

/// 1 when the hardware path is in use (reported by `sofa info` and the benchmarks).
int sofa_crc32c_hardware(void);

/// The table implementation, whatever the CPU (for tests that compare the two paths).
uint32_t sofa_crc32c_software(uint32_t crc, const void *data, size_t length);

#endif
