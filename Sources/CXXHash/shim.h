#include <xxhash.h>

/* XXH3-128 is stable (its output fixed, FORMAT.md §10.1.3) from xxHash 0.8.0 on; an older libxxhash-dev would
   hash revisions differently or lack the function. */
#if !defined(XXH_VERSION_NUMBER) || XXH_VERSION_NUMBER < 800
#error "Sofa needs xxHash 0.8.0 or later (libxxhash-dev): XXH3_128bits is stable only from there"
#endif
