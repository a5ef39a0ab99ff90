/* shoal: scheduling and communication for distributed training.
 * One header per area; this one includes them all:
 *   status.h   status codes and the detailed message of the last error
 *   comm.h     communicators, blocking collectives, point to point
 *   request.h  non-blocking collectives (requests, test/wait)
 *   partial.h  partial allreduce: does not wait for stragglers (late ranks relay)
 *   sync.h     synchronization strategies (BSP, DS-Sync, local SGD, PS, partial) for any training loop
 *   train.h    datasets, models and the data-parallel training runtime
 *   sched.h    scheduling policy names
 *   sim.h      the cluster scheduling simulator
 * Build against the installed library with `pkg-config --cflags --libs shoal`. */
#ifndef SHOAL_SHOAL_H
#define SHOAL_SHOAL_H

#include "shoal/status.h"
#include "shoal/comm.h"
#include "shoal/request.h"
#include "shoal/partial.h"
#include "shoal/sync.h"
#include "shoal/train.h"
#include "shoal/sched.h"
#include "shoal/sim.h"

/* The library's version; libshoal.so.MAJOR is the soname (an ABI change bumps MAJOR). */
#define SHOAL_VERSION_MAJOR 0
#define SHOAL_VERSION_MINOR 1
#define SHOAL_VERSION_PATCH 0
#define SHOAL_VERSION_STRING "0.1.0"

#endif
