/* The door new processes enter a running job through (door.c), kept by rank 0 of the world; grow admits
 * whoever waits there (elastic/grow.c). */
#ifndef SHOAL_COMM_BOOTSTRAP_DOOR_H
#define SHOAL_COMM_BOOTSTRAP_DOOR_H

struct shoal__world;

/* A registration: "ip:port host boot_id pid", as published at the rendezvous (rank/<r>), NUL-padded. */
#define SHOAL__REG_BYTES 192
typedef char shoal__reg_t[SHOAL__REG_BYTES];

/* The deadline of each frame rank 0 writes to a newcomer it admits. */
#define SHOAL__DOOR_HS_S 2.0
/* A door call serves everyone waiting at once (a newcomer answers at once) for at most this long: silent
 * connections and a flood of strangers delay a grow by no more. */
#define SHOAL__DOOR_SERVE_S 1.0

/* Rank 0: everyone waiting at the door now (up to max), authenticated, with their registrations, all
 * handshakes at once within SHOAL__DOOR_SERVE_S; the door is opened on the first call (a failure is warned
 * about once: then nobody can enter). */
int shoal__door_poll(struct shoal__world *w, int *fds, shoal__reg_t *regs, int max);
/* At a normal end, rank 0 tells the processes waiting at its door that the job is over. */
void shoal__door_finish(struct shoal__world *w);

#endif
