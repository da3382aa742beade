// ICU's root collator for Sofa's string collation (DESIGN.md §2).
//
// A UCollator must not be used by two threads at once, so each thread clones the shared root collator on
// first use and keeps the clone in thread-specific storage (closed when the thread exits).
#include "sofa_icu.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <unicode/ucol.h>
#include <unicode/uversion.h>
#include <unicode/ustring.h>

static UCollator *root_collator;
static pthread_once_t root_once = PTHREAD_ONCE_INIT;
static pthread_key_t clone_key;

static void close_clone(void *collator) { ucol_close((UCollator *)collator); }

static void open_root(void) {
    UErrorCode status = U_ZERO_ERROR;
    UCollator *c = ucol_open("", &status);
    if (U_FAILURE(status)) {
        root_collator = NULL;
        return;
    }
    root_collator = c;
    pthread_key_create(&clone_key, close_clone);
}

static UCollator *thread_collator(void) {
    pthread_once(&root_once, open_root);
    if (root_collator == NULL) return NULL;
    UCollator *c = (UCollator *)pthread_getspecific(clone_key);
    if (c != NULL) return c;
    UErrorCode status = U_ZERO_ERROR;
#if U_ICU_VERSION_MAJOR_NUM >= 71
    c = ucol_clone(root_collator, &status);
#else
    c = ucol_safeClone(root_collator, NULL, NULL, &status);
#endif
    if (U_FAILURE(status) || c == NULL) return NULL;
    pthread_setspecific(clone_key, c);
    return c;
}

// UTF-8 to UTF-16 with an ASCII fast path. Returns the UTF-16 length, or -1 on invalid input.
static int32_t to_utf16(const uint8_t *s, int32_t n, UChar *buf, int32_t cap) {
    int32_t i = 0;
    while (i < n && i < cap && s[i] < 0x80) {
        buf[i] = s[i];
        i++;
    }
    if (i == n) return n;
    UErrorCode status = U_ZERO_ERROR;
    int32_t produced = 0;
    u_strFromUTF8(buf + i, cap - i, &produced, (const char *)s + i, n - i, &status);
    if (status == U_BUFFER_OVERFLOW_ERROR) return -2 - (i + produced);  // needs i + produced units
    if (U_FAILURE(status)) return -1;
    return i + produced;
}

#define STACK_UNITS 512

int32_t sofa_icu_sort_key(const uint8_t *utf8, int32_t length, uint8_t *out, int32_t capacity) {
    UCollator *c = thread_collator();
    if (c == NULL || length < 0) return -1;
    UChar stack[STACK_UNITS];
    UChar *buf = stack;
    int32_t units = to_utf16(utf8, length, buf, STACK_UNITS);
    if (units <= -2) {
        int32_t need = -2 - units;
        buf = (UChar *)malloc(sizeof(UChar) * (size_t)need);
        if (buf == NULL) return -1;
        units = to_utf16(utf8, length, buf, need);
    }
    int32_t result = -1;
    if (units >= 0) result = ucol_getSortKey(c, buf, units, out, capacity);
    if (buf != stack) free(buf);
    return result > 0 ? result : -1;
}

int32_t sofa_icu_compare(const uint8_t *a, int32_t a_length, const uint8_t *b, int32_t b_length) {
    UCollator *c = thread_collator();
    if (c == NULL) return 0;
    UErrorCode status = U_ZERO_ERROR;
    UCollationResult r = ucol_strcollUTF8(c, (const char *)a, a_length, (const char *)b, b_length, &status);
    if (U_FAILURE(status)) return 0;
    return r == UCOL_LESS ? -1 : (r == UCOL_GREATER ? 1 : 0);
}

int32_t sofa_icu_collator_version(uint8_t out[4]) {
    UCollator *c = thread_collator();
    if (c == NULL) {
        memset(out, 0, 4);
        return -1;
    }
    UVersionInfo v;
    ucol_getVersion(c, v);
    memcpy(out, v, 4);
    return 0;
}

void sofa_icu_library_version(uint8_t out[4]) {
    UVersionInfo v;
    u_getVersion(v);
    memcpy(out, v, 4);
}
