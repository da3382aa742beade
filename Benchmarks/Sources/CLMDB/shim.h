// LMDB, the peer that sets the bar for reads (liblmdb-dev; pkg-config name `lmdb`).
#include <lmdb.h>
