/* What `shoal flow status` prints for one host: its agent (running or not, its controller), its flows
 * (live, paced, at which rates), the background it measures, and when it last heard from the controller.
 * Read from the host's flow segment, so it works while the controller is down too. */
#ifndef SHOAL_FLOW_STATUS_H
#define SHOAL_FLOW_STATUS_H

#include <stddef.h>

/* The line for host (the segment's host name) into buf. 0, or a negative status (a segment of another
 * shoal version). A host without a segment gets a line saying so (0). */
int shoal__flow_status_line(const char *host, char *buf, size_t cap);

#endif
