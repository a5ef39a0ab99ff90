/* The cluster a scheduler places work on: machines with GPUs, CPU cores,
 * memory and a NIC, grouped in racks behind uplinks with an oversubscription
 * ratio. The structure holds capacities AND the free amounts; the free
 * amounts are changed only through shoal__cluster_take/give (called by the
 * scheduler context when a policy assigns a job), so that the bookkeeping that
 * makes placement fast (per-rack totals, machines bucketed by free GPUs) can
 * never drift from the truth. Policies read it freely. */
#ifndef SHOAL_SCHED_MODEL_CLUSTER_H
#define SHOAL_SCHED_MODEL_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#define SHOAL_MAX_GPUS_PER_MACHINE 64

/* Resources of one machine, or demanded by one task (worker or PS). */
typedef struct shoal_res {
  int gpus;
  double cpus;    /* cores */
  double mem_gb;
} shoal_res_t;

typedef struct shoal_machine {
  int id;
  int rack;
  shoal_res_t cap;
  shoal_res_t free;
  double nic_gbps;          /* NIC bandwidth, Gb/s */
  int sockets;              /* CPU sockets; its GPUs are split among them in contiguous blocks (model/gpu_slots.h) */
} shoal_machine_t;

typedef struct shoal_rack {
  int first, count;         /* machines [first, first+count) */
  int gpus, gpus_free;
  double uplink_gbps;       /* count * nic / oversub */
} shoal_rack_t;

/* Network parameters of the analytic speed model (docs/simulator.md). */
typedef struct shoal_net {
  double intra_gbps;        /* GPU-GPU bandwidth inside a machine (NVLink/PCIe), Gb/s */
  double alpha_intra_s;     /* per-message latency inside a machine */
  double alpha_inter_s;     /* per-message latency between machines */
  double oversub;           /* rack uplink oversubscription, >= 1 */
} shoal_net_t;

typedef struct shoal_cluster {
  int nmachines, nracks;
  shoal_machine_t *m;       /* [nmachines], machine i has id i; racks are contiguous */
  shoal_rack_t *racks;      /* [nracks] */
  shoal_net_t net;
  int gpus_total, gpus_free;
  int max_gpus_per_machine;
  /* free-GPU buckets: bit i of bucket[f] is set when machine i has f free GPUs
   * (best fit in O(max GPUs per machine * nmachines/64), lowest id first) */
  int words;                /* 64-bit words per bucket */
  uint64_t *bucket;         /* [(max_gpus_per_machine+1) * words] */
  int ps_with_workers;      /* 1: a job's parameter servers run only on machines holding its workers: every
                             * assignment moves the others there (the live controller on Slurm, which gives every
                             * node of a job the same GPUs: docs/design.md) */
} shoal_cluster_t;

/* Description of a cluster to build (from flags or a config file). Machines
 * are homogeneous within a "group"; a config file may list several groups. */
typedef struct shoal_cluster_group {
  int machines;
  int racks;                /* racks this group's machines are spread over (contiguously) */
  shoal_res_t per_machine;
  double nic_gbps;
  int sockets;              /* per machine, 1..min(gpus, 8); 0: 2 when the machine has an even number of GPUs, else 1 */
} shoal_cluster_group_t;

typedef struct shoal_cluster_spec {
  int ngroups;
  shoal_cluster_group_t group[8];
  shoal_net_t net;
} shoal_cluster_spec_t;

/* Defaults: 256 machines x 8 GPUs, 16 racks, 64 cores, 512 GB, 100 Gb/s NIC,
 * 300 Gb/s... see docs/simulator.md for every value. */
void shoal__cluster_spec_default(shoal_cluster_spec_t *spec);
/* Parse an INI ([cluster] / [group] sections, key = value) or a JSON object
 * (same keys); errors name file:line and the key. On success *spec is
 * overwritten (fields not in the file keep their defaults). */
int shoal__cluster_spec_load(const char *path, shoal_cluster_spec_t *spec);
/* The same from memory; name is used in messages. */
int shoal__cluster_spec_parse(const char *name, const char *text, size_t len, shoal_cluster_spec_t *spec);
int shoal__cluster_spec_validate(const shoal_cluster_spec_t *spec);

int  shoal__cluster_create(const shoal_cluster_spec_t *spec, shoal_cluster_t **out);
void shoal__cluster_destroy(shoal_cluster_t *c);

/* Take/give resources on one machine. take fails with SHOAL_ERR_INFEASIBLE
 * (leaving everything unchanged) if any resource would go negative. */
int  shoal__cluster_take(shoal_cluster_t *c, int machine, const shoal_res_t *r);
void shoal__cluster_give(shoal_cluster_t *c, int machine, const shoal_res_t *r);

/* Lowest-id machine with exactly f free GPUs at or after machine `from`, -1 if none. */
int  shoal__cluster_next_with_free(const shoal_cluster_t *c, int f, int from);
/* Machine with the fewest free GPUs >= n (ties: lowest id), -1 if none. */
int  shoal__cluster_best_fit(const shoal_cluster_t *c, int n);

/* One-line description ("256 machines x 8 GPUs in 16 racks ..."). */
void shoal__cluster_describe(const shoal_cluster_t *c, char *buf, size_t cap);

#endif
