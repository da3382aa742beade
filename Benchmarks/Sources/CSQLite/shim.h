// SQLite, the peer a Swift developer reaches for (libsqlite3-dev; pkg-config name `sqlite3`).
#include <sqlite3.h>
