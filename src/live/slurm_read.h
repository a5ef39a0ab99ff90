/* Reading Slurm's answers: sinfo --json and squeue --json (OpenAPI v0.0.38,
 * Slurm 22.05; later versions' extra fields are ignored), sshare -P, and the
 * switches of scontrol show topology. Each parser takes the command's output
 * and fills manager.h's types; a JSON answer that carries Slurm's "errors"
 * (slurmctld does not answer: the commands exit 0 with an empty list) is an
 * error, not an empty cluster. */
#ifndef SHOAL_LIVE_SLURM_READ_H
#define SHOAL_LIVE_SLURM_READ_H

#include "live/manager.h"

int shoal__slurm_parse_nodes(const char *json, shoal_live_nodes_t *out);
int shoal__slurm_parse_jobs(const char *json, shoal_live_jobs_t *out);
/* sshare -a -n -P -o Account,User,RawShares,NormShares,EffectvUsage,FairShare */
int shoal__slurm_parse_shares(const char *text, shoal_live_shares_t *out);
/* GPUs in a gres string: "gpu:2", "gpu:v100:2(S:0-1)", "gpu:1(IDX:0)", "gres:gpu:2"; 0 if none */
int shoal__slurm_gres_gpus(const char *gres);
/* The level-0 switches of `scontrol show topology`: calls fn(arg, rack index, node list expression) for each. */
int shoal__slurm_parse_topology(const char *text, void (*fn)(void *arg, int rack, const char *nodes), void *arg);
/* the job's output file with Slurm's patterns (%j %x %u %%) filled in */
void shoal__slurm_output_path(const char *pattern, long id, const char *name, const char *user, char *buf, size_t cap);

#endif
