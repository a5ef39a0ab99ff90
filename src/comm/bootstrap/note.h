/* Notes to the launcher: `shoal launch` hands every rank the write end of a pipe (SHOAL_NOTE_FD) and reads
 * there which rank failed because of which, so that it blames the cause, not the first rank to exit. */
#ifndef SHOAL_COMM_BOOTSTRAP_NOTE_H
#define SHOAL_COMM_BOOTSTRAP_NOTE_H

/* This process's communication failed because the peer process peer_pid closed, left or aborted first:
 * one line "lost <pid> <peer_pid>" on the launcher's pipe. Nothing without a launcher, or when the
 * descriptor is no longer the launcher's pipe. Never blocks. */
void shoal__note_lost_peer(int peer_pid);

#endif
