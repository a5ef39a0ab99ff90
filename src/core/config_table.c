/* THE table of shoal's configuration variables. Every SHOAL_* variable read
 * anywhere in the code must have a row here (a test greps the sources), and
 * the README's table must list every row (another test). Keep rows grouped by
 * area; one line of help each. */
#include "core/config.h"

const shoal__config_var_t shoal__config_vars[] = {
  /* core */
  {"SHOAL_DEBUG", "WARN", "core", "log level: ERROR, WARN, INFO, DEBUG or TRACE (another value: an error of shoal_comm_init; elsewhere reported, WARN used)"},
  {"SHOAL_DEBUG_SUBSYS", "", "core", "log only these subsystems (INIT,NET,COLL,DSSYNC,TUNING,SIM,TRAIN,FLOW); ^ excludes; an unknown name: an error of shoal_comm_init; elsewhere reported"},
  {"SHOAL_CONF_FILE", "~/.shoal.conf", "core", "file of SHOAL_*=value defaults in a subset of shell syntax (export, quotes, # comments, blanks around =; no $ expansion; the later of two lines counts); the environment wins; SHOAL_CONF_FILE and SHOAL_LIBRARY come from the environment only; a malformed line, or a file named here that cannot be read: an error of shoal_comm_init, elsewhere reported"},
  /* comm: bootstrap */
  {"SHOAL_RANK", "", "comm", "this process's rank (else RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID)"},
  {"SHOAL_WORLD_SIZE", "", "comm", "number of ranks (else WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS)"},
  {"SHOAL_MASTER_ADDR", "127.0.0.1", "comm", "host of rank 0's rendezvous store (else MASTER_ADDR)"},
  {"SHOAL_MASTER_PORT", "29500", "comm", "port of the store (else MASTER_PORT); 0 lets rank 0 pick and the launcher pass it on"},
  {"SHOAL_SOCKET_IFNAME", "", "comm", "interface to advertise: prefix match, =exact, ^exclude, comma list"},
  {"SHOAL_TOKEN", "", "comm", "shared secret checked by the store and by peers"},
  {"SHOAL_TIMEOUT", "300", "comm", "deadline in seconds of every blocking communication call"},
  {"SHOAL_CONNECT_TIMEOUT", "120", "comm", "deadline in seconds for rendezvous and connection setup"},
  {"SHOAL_HOSTNAME", "", "comm", "override the host name used for locality detection (emulate hosts)"},
  {"SHOAL_BIND", "auto", "comm", "`shoal launch` CPU binding: core (rank r on the (r mod ncpu)-th usable CPU), none, auto (core when ranks <= CPUs or SHOAL_SHM is on)"},
  {"SHOAL_JOB_ID", "", "comm", "identity of the job (set by `shoal launch`): the rendezvous store refuses ranks of another job"},
  {"SHOAL_STORE_FD", "", "comm", "set by `shoal launch` for rank 0 (for every rank with --on-failure continue or restart): an inherited socket already listening on the store port, the job's door after start-up"},
  {"SHOAL_NOTE_FD", "", "comm", "set by `shoal launch`: FD:INODE of a pipe where a rank whose peer closed, left or aborted first says so, and the launcher then blames that peer"},
  {"SHOAL_JOIN", "0", "comm", "1: shoal_comm_init joins the running job through its door instead of starting one (set by `shoal launch --on-failure restart` for restarted ranks)"},
  /* comm: collectives */
  {"SHOAL_ALGO", "auto", "comm", "force an allreduce algorithm: ring, rhd (halving-doubling), rd (recursive doubling), shm, hier, trees (multi-tree), relay (reduction trees with relays), cma (one host, single copy over cross-memory attach), auto (read when the world is created)"},
  {"SHOAL_ALPHA_US", "", "comm", "cost model: per-message latency in microseconds (default: built-in table)"},
  {"SHOAL_BETA_GBPS", "", "comm", "cost model: link bandwidth in GB/s (default: built-in table)"},
  {"SHOAL_GAMMA_GBPS", "", "comm", "cost model: reduction throughput in GB/s (default: built-in table)"},
  {"SHOAL_RACK", "", "comm", "this host's rack (any name without blanks; else the last switch of Slurm's SLURM_TOPOLOGY_ADDR): flows between racks share the rack uplinks in the cost model; set by `shoal launch --testbed`"},
  {"SHOAL_RACK_UPLINK_GBPS", "", "comm", "cost model: capacity of a rack's uplink each way in GB/s (default: one host link's rate); set by `shoal launch --testbed`"},
  {"SHOAL_CHUNK_BYTES", "", "comm", "pipeline chunk size of the ring allreduce (default: cost model)"},
  {"SHOAL_TREES", "auto", "comm", "trees allreduce shape: auto (cost model), or P trees with an optional key, P:pin, P:bdp, P:bw (ablations)"},
  {"SHOAL_SOCKET_BUFFER", "4194304", "comm", "SO_SNDBUF/SO_RCVBUF in bytes for peer sockets"},
  {"SHOAL_SOCKET_RCVBUF_REMOTE", "131072", "comm", "SO_RCVBUF of sockets to peers on other hosts: what a peer can put on the network to a rank that has not posted its receive (0: SHOAL_SOCKET_BUFFER)"},
  {"SHOAL_EMU_DELAY_US", "0", "comm", "emulated one-way latency added to every outgoing message (testing)"},
  {"SHOAL_TCP_CONGESTION", "auto", "comm", "TCP congestion control of peer sockets: auto (bbr -> cubic or reno), system, or a name"},
  {"SHOAL_SPIN_US", "0", "comm", "TCP: poll without sleeping (yielding the CPU) this long before blocking; for dedicated cores"},
  /* comm: shared memory and tuning (docs/shm.md) */
  {"SHOAL_SHM", "1", "comm", "use shared memory between ranks on the same host (same host name and boot id)"},
  {"SHOAL_SHM_RING_BYTES", "262144", "comm", "bytes of each same-host pair's point-to-point ring"},
  {"SHOAL_SHM_CHUNK_BYTES", "524288", "comm", "pipeline chunk of the shared-memory allreduce (per rank and buffer)"},
  {"SHOAL_SHM_NT_BYTES", "16777216", "comm", "shm allreduces of at least this many bytes write results with non-temporal stores (0: never)"},
  {"SHOAL_SHM_SPIN_US", "50", "comm", "shm waits spin (yielding the CPU) this long before sleeping on a futex"},
  {"SHOAL_TUNE", "auto", "comm", "tuning profile: off, auto (across hosts: SHOAL_TUNE_FILE's entry, else the link matrix measured once and stored; one host: nothing), cache (the entry if any), init (whole profile at creation if none), force"},
  {"SHOAL_TUNE_FILE", "~/.cache/shoal/tune", "comm", "file caching tuning profiles keyed by host set ($XDG_CACHE_HOME/shoal/tune when that is set; \"\": none)"},
  {"SHOAL_PROFILE_FLOWS", "0", "comm", "link profile: host pairs measured at once (0: every host's link at once; hosts emulated on one machine share its CPUs)"},
  {"SHOAL_PROFILE_BYTES", "", "comm", "link profile: bytes timed per host pair after the lead-in (unset: 4 MiB; under SHOAL_TUNE=auto 512 KiB after a 512 KiB lead-in)"},
  {"SHOAL_REPROFILE", "auto", "comm", "measure the link matrix again when allreduce times drift from the model: auto (with a measured or cached profile), on, off"},
  {"SHOAL_REPROFILE_CALLS", "8", "comm", "re-profiling: world-communicator allreduces per check (a change is seen within twice this many)"},
  {"SHOAL_REPROFILE_FACTOR", "1.5", "comm", "re-profiling: drift of time/prediction (either way) that triggers it"},
  {"SHOAL_REPROFILE_MIN_BYTES", "262144", "comm", "re-profiling: allreduces smaller than this are not watched"},
  /* flow scheduling (docs/flow.md) */
  {"SHOAL_FLOW_MONITOR", "auto", "comm", "flow monitor of cross-host TCP connections: auto (when this host's flow segment exists, i.e. an agent runs), on (create the segment if missing), off"},
  {"SHOAL_FLOW_HOST", "", "comm", "host name of the flow segment /dev/shm/shoal-flow.HOST that ranks and the agent share (default: gethostname())"},
  /* bench */
  {"SHOAL_BENCH_MIN_BW", "", "bench", "fail `shoal bench` when average busbw (GB/s) is below this"},
  /* sim */
  {"SHOAL_SIM_CHECK", "0", "sim", "verify the simulator's invariants after every decision (capacity, bookkeeping, work)"},
  /* serve (docs/serving.md) */
  {"SHOAL_SERVE_ROUTER", "", "serve", "`shoal serve` replica: the router (http://HOST:PORT) it joins once ready and leaves before draining, when --register is not given (set by `shoal sched serve --loan-router` for its replica jobs)"},
  {"SHOAL_SERVE_DROP_AFTER", "20", "serve", "`shoal serve --router`: a replica is removed after this many health checks in a row (one every --health-every, 0.25 s) without an answer (refused, reset, timed out), as a replica killed with SIGKILL; 0: never (--drop-after)"},
  /* python (read by the Python package, python/shoal/_lib.py) */
  {"SHOAL_LIBRARY", "", "python", "path of libshoal.so.0 for `import shoal` (default: next to the installed package, the repository's build/, then the loader's path)"},
};

const size_t shoal__config_nvars = sizeof shoal__config_vars / sizeof shoal__config_vars[0];
