// Only C code includes this (Sources/CSofaICU). Swift never imports ICU types directly: Foundation on Linux
// carries its own ICU, and a Swift module that sees both fails to compile on a clean build.
#include <unicode/ucol.h>
#include <unicode/ustring.h>
#include <unicode/uiter.h>
