// CRC32C for chunk checksums (FORMAT.md, "Chunk framing").
//
// Two implementations with one result: the SSE4.2 crc32 instruction (8 bytes per step, three streams at once
// on buffers of 768 bytes or more) and a slicing-by-8 table for CPUs without it. The choice is made once, at first use.
#include "sofa_crc32c.h"

#include <string.h>

#define POLY 0x82F63B78u

static uint32_t table[8][256];
static int table_ready;

static void build_table(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = table[0][n];
        for (int s = 1; s < 8; s++) {
            c = table[0][c & 0xff] ^ (c >> 8);
            table[s][n] = c;
        }
    }
    __atomic_store_n(&table_ready, 1, __ATOMIC_RELEASE);
}

static uint32_t crc_software(uint32_t crc, const unsigned char *p, size_t n) {
    if (!__atomic_load_n(&table_ready, __ATOMIC_ACQUIRE)) build_table();
    crc = ~crc;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);  // little-endian load; this file is compiled for x86-64/arm64 only
        w ^= crc;
        crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
              table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
              table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__)
#include <pthread.h>

// The crc32 instruction takes 3 cycles but can start one per cycle: three independent streams over three
// consecutive stretches of STRETCH bytes keep it busy, and their results are joined by the linearity of CRCs.
// With c the register after a stretch and z the register after the next stretch starting from 0, the register
// after both is shift(c) ^ z, where shift(c) runs STRETCH zero bytes through the register from c; shift is
// linear in c's bits, so it is four table lookups, one per byte of c (tables made once, with the instruction).
#define STRETCH 256
static uint32_t shift_table[4][256];
static pthread_once_t shift_once = PTHREAD_ONCE_INIT;

__attribute__((target("sse4.2")))
static void build_shift_table(void) {
    for (int k = 0; k < 4; k++) {
        for (uint32_t b = 0; b < 256; b++) {
            uint64_t c = (uint64_t)b << (8 * k);
            for (int i = 0; i < STRETCH / 8; i++) c = __builtin_ia32_crc32di(c, 0);
            shift_table[k][b] = (uint32_t)c;
        }
    }
}

static inline uint32_t shift(uint32_t c) {
    return shift_table[0][c & 0xff] ^ shift_table[1][(c >> 8) & 0xff] ^ shift_table[2][(c >> 16) & 0xff] ^
           shift_table[3][c >> 24];
}

__attribute__((target("sse4.2")))
static uint32_t crc_hardware(uint32_t crc, const unsigned char *p, size_t n) {
    uint64_t c = ~crc;
    if (n >= 3 * STRETCH) {
        pthread_once(&shift_once, build_shift_table);
        while (n >= 3 * STRETCH) {
            uint64_t c1 = 0, c2 = 0;
            for (int i = 0; i < STRETCH; i += 8) {
                uint64_t w0, w1, w2;
                memcpy(&w0, p + i, 8);
                memcpy(&w1, p + STRETCH + i, 8);
                memcpy(&w2, p + 2 * STRETCH + i, 8);
                c = __builtin_ia32_crc32di(c, w0);
                c1 = __builtin_ia32_crc32di(c1, w1);
                c2 = __builtin_ia32_crc32di(c2, w2);
            }
            c = shift(shift((uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
            p += 3 * STRETCH;
            n -= 3 * STRETCH;
        }
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}

static int has_hardware(void) {
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("sse4.2") ? 1 : 0;
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
}
#else
static int has_hardware(void) { return 0; }
static uint32_t crc_hardware(uint32_t crc, const unsigned char *p, size_t n) { return crc_software(crc, p, n); }
#endif

uint32_t sofa_crc32c(uint32_t crc, const void *data, size_t length) {
    const unsigned char *p = (const unsigned char *)data;
    return has_hardware() ? crc_hardware(crc, p, length) : crc_software(crc, p, length);
}

int sofa_crc32c_hardware(void) { return has_hardware(); }

/// Exposed for the tests: the table path, whatever the CPU.
uint32_t sofa_crc32c_software(uint32_t crc, const void *data, size_t length) {
    return crc_software(crc, (const unsigned char *)data, length);
}
