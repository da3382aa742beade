#ifndef SOFA_ICU_H
#define SOFA_ICU_H

// Sofa's window onto ICU's root collator. No ICU type appears here on purpose: Swift imports this header,
// and a Swift module that sees the system ICU headers next to Foundation's private ICU fails to build.

#include <stdint.h>

/// Writes the ICU sort key (root locale, default tertiary strength) of `length` bytes of UTF-8 into `out`,
/// including the terminating 0 byte. Returns the full length of the key; when that exceeds `capacity`
/// the caller must call again with a larger buffer. Returns -1 when ICU reports an error.
/// Safe to call from any thread: each thread uses its own clone of the collator.
int32_t sofa_icu_sort_key(const uint8_t *utf8, int32_t length, uint8_t *out, int32_t capacity);

/// Compares two UTF-8 strings with the same collator: -1, 0 or 1. Agrees with the order of their sort keys.
int32_t sofa_icu_compare(const uint8_t *a, int32_t a_length, const uint8_t *b, int32_t b_length);

/// The root collator's version (`ucol_getVersion`, 4 bytes). Sort keys from collators of different
/// versions must not be mixed. Returns 0 on success, -1 if the collator could not be opened.
int32_t sofa_icu_collator_version(uint8_t out[4]);

/// The ICU library version (`u_getVersion`, 4 bytes).
void sofa_icu_library_version(uint8_t out[4]);

#endif
