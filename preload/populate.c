/* populate.c - see populate.h. */
#include "populate.h"

int populate_unsupported;
