/* What the tests on the testbed's Slurm share (tests/live/test_slurm*.c): skipping without root, Slurm or
 * namespaces, naming a testbed, and the start and end of their shell scripts. */
#ifndef SHOAL_TESTS_LIVE_SLURM_UTIL_H
#define SHOAL_TESTS_LIVE_SLURM_UTIL_H

#include <stddef.h>

/* lines of the file starting with prefix; -1 if it cannot be read */
int slurm_count_lines(const char *path, const char *prefix);
/* skips the test (with the reason) without root or Slurm */
void slurm_need(void);
/* skips the test (with the reason) without root, Slurm, network namespaces or the experiment script
 * SCRIPT (NULL: none), run from the repository root; names the testbed (TAG and the pid) and, if DIR is
 * given, a work directory for it */
void slurm_test_begin(const char *script, const char *tag, char *name, size_t nname, char *dir, size_t ndir);

/* The start of a test's script: a 2-host testbed with Slurm and GPUS GPUs per host (the testbed's name, the
 * work directory and GPUS are its printf arguments after the shoal binary; $UP, if the script sets it before,
 * adds options to `up`), X runs a command on h0, sub submits a ckjob.sh job, runs JOB counts its runs, state JOB
 * STATE waits (30 s at most) until Slurm shows the job in that state; the script ends with TESTBED_SH_END */
#define TESTBED_SH                                                                                             \
  "S=$(realpath %s); N=%s; D=%s; CK=$PWD/experiments/live-slurm/ckjob.sh; rm -rf $D; mkdir -p $D\n"          \
  "$S testbed up --name $N --hosts 2 --slurm --gpus %d ${UP:-} > $D/up.log 2>&1 || { cat $D/up.log; exit 1; }\n" \
  "X() { timeout 30 $S testbed exec --name $N h0 -- \"$@\"; }\n"                                              \
  "sub() { timeout 30 $S submit --testbed $N --output $D/%%j.out \"$@\"; }\n"                                 \
  "runs() { grep -c ^run $D/$1.log 2>/dev/null || echo 0; }\n"                                             \
  "state() { i=0; while [ $i -lt 150 ]; do [ \"$(X squeue -h -t all -j $1 -o %%T)\" = $2 ] && return 0; "   \
  "sleep 0.2; i=$((i+1)); done; echo \"job $1 never $2\"; return 1; }\n"
/* After TESTBED_SH: Fashion-MNIST unpacked into $D/data, T the live workload's task script (real shoal train). */
#define TRAINJOB_SH                                                                                            \
  "mkdir -p $D/data; for f in /usr/share/datasets/fashion-mnist/*-ubyte.gz; do "                               \
  "gunzip -c $f > $D/data/$(basename $f .gz) || exit 1; done\n"                                              \
  "T=$PWD/experiments/live-slurm/trainjob.sh\n"
#define TESTBED_SH_END "$S testbed down --name $N > /dev/null 2>&1; rm -rf $D\n"

#endif
