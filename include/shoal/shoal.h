/* shoal: scheduling and communication for distributed training.
 * One header per area; this one includes them all. */
#ifndef SHOAL_SHOAL_H
#define SHOAL_SHOAL_H

#include "shoal/status.h"
#include "shoal/comm.h"
#include "shoal/sync.h"

#define SHOAL_VERSION_MAJOR 0
#define SHOAL_VERSION_MINOR 1
#define SHOAL_VERSION_STRING "0.1.0"

#endif
