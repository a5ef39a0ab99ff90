/* `shoal testbed` and `shoal launch --testbed` through the real CLI: a
 * 2-host x 2-rank emulated cluster (network namespaces, veth, bridge, tbf),
 * collectives across hosts, a link degraded while a job runs, and teardown
 * after kill -9 of the launcher. Each test's testbed has its own name
 * (st<pid>), lives inside one shell script whose EXIT trap takes it down, and
 * the test then checks that nothing of it is left. Skipped (with the reason)
 * when not root or without `ip`/`tc` or namespaces. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../runner.h"

static char out[1 << 17];

static void need_namespaces(void) {
  if (geteuid() != 0) shoal_test_skip("not root: network namespaces and tc need root");
  if (access("/usr/sbin/ip", X_OK) && access("/sbin/ip", X_OK) && access("/usr/bin/ip", X_OK))
    shoal_test_skip("no ip command (iproute2)");
  if (access("/usr/sbin/tc", X_OK) && access("/sbin/tc", X_OK) && access("/usr/bin/tc", X_OK))
    shoal_test_skip("no tc command (iproute2)");
  char cmd[256];
  snprintf(cmd, sizeof cmd, "ip netns add stp%d && ip netns del stp%d", (int)getpid(), (int)getpid());
  if (shoal_test_run_cmd(cmd, out, sizeof out, 10) != 0) shoal_test_skip("cannot create a network namespace here");
}

/* Nothing of testbed `name` remains: namespaces, state, cgroups, processes. */
static void check_gone(const char *name) {
  char p[256];
  struct stat st;
  snprintf(p, sizeof p, "/run/shoal-testbed/%s", name);
  CHECK_MSG(stat(p, &st) != 0, "%s still exists", p);
  snprintf(p, sizeof p, "/sys/fs/cgroup/cpu/shoal-testbed/%s", name);
  CHECK_MSG(stat(p, &st) != 0, "%s still exists", p);
  DIR *d = opendir("/run/netns");
  size_t nl = strlen(name);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)))
      CHECK_MSG(strncmp(e->d_name, name, nl) || e->d_name[nl] != '-', "namespace %s left behind", e->d_name);
    closedir(d);
  }
  /* no interface of ours in the root namespace either (the design creates none there) */
  char cmd[256];
  snprintf(cmd, sizeof cmd, "ip -o link | grep -c '%s' || true", name);
  char links[4096];
  shoal_test_run_cmd(cmd, links, sizeof links, 10);
  CHECK_MSG(atoi(links) == 0, "interfaces named after %s in the root namespace: %s", name, links);
}

static void tb_name(char *b, size_t cap) { snprintf(b, cap, "st%d", (int)getpid() % 10000000); }

TEST_T(testbed_allreduce_across_hosts_hier_and_flat, 60) {
  need_namespaces();
  char name[32], cmd[4096];
  tb_name(name, sizeof name);
  const char *S = shoal_test_cli();
  snprintf(cmd, sizeof cmd,
           "set -e; S=%s; N=%s; trap '$S testbed down --name $N >/dev/null' EXIT\n"
           "$S testbed up --name $N --hosts 2 --rate 1gbit\n"
           "$S testbed up --name $N --hosts 2 2>&1 && exit 9 || true\n" /* a second up is an error */
           "$S testbed status --name $N\n"
           "timeout 20 $S launch --testbed $N -n 4 --per-host 2 -- sh -c 'echo where $(hostname) $LOCAL_RANK/$LOCAL_WORLD_SIZE'\n"
           "for a in hier ring rhd; do\n"
           "  SHOAL_ALGO=$a SHOAL_DEBUG=INFO SHOAL_DEBUG_SUBSYS=COLL timeout 25 $S launch --testbed $N -n 4 --per-host 2 "
           "--timeout 20 -- $S selftest --count 8192 >$TMPDIR/tb$$.out 2>&1; echo $a-rc=$?\n"
           "  grep -E 'PASS|FAIL' $TMPDIR/tb$$.out\n"
           "  sed -n 's/.*\\[shoal \\([^:]*\\):[0-9]* \\(r[0-9]*\\)\\] INFO COLL: allreduce.* -> \\([a-z]*\\).*/\\1 \\2] -> \\3/p' "
           "$TMPDIR/tb$$.out | sort -u; rm -f $TMPDIR/tb$$.out\n"
           "done\n",
           S, name);
  setenv("TMPDIR", "/tmp", 0);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 55);
  check_gone(name);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, out);
  CHECK_CONTAINS(out, "hier-rc=0");
  CHECK_CONTAINS(out, "ring-rc=0");
  CHECK_CONTAINS(out, "rhd-rc=0");
  char want[256];
  CHECK_CONTAINS(out, "already exists");
  for (int r = 0; r < 4; r++) {
    snprintf(want, sizeof want, "[%d] where %s-h%d %d/2", r, name, r / 2, r % 2);
    CHECK_CONTAINS(out, want);
  }
  CHECK_MSG(!strstr(out, "FAIL"), "a collective failed: %s", out);
  /* every algorithm ran on every rank, named host by host, and the checks passed */
  const char *algos[] = {"hier", "ring", "rhd"};
  for (int a = 0; a < 3; a++)
    for (int r = 0; r < 4; r++) {
      snprintf(want, sizeof want, "%s-h%d r%d] -> %s", name, r / 2, r, algos[a]);
      CHECK_CONTAINS(out, want);
    }
  CHECK_CONTAINS(out, "PASS");
}

TEST_T(testbed_degraded_link_during_a_run, 60) {
  need_namespaces();
  char name[32], cmd[4096];
  tb_name(name, sizeof name);
  const char *S = shoal_test_cli();
  /* 2 hosts x 2 ranks; 1 MiB allreduces with element checks; after 1 s host
   * h1's link drops to 50 Mbit/s and its CPU to a quarter, then comes back */
  snprintf(cmd, sizeof cmd,
           "set -e; S=%s; N=%s; trap '$S testbed down --name $N >/dev/null' EXIT\n"
           "$S testbed up --name $N --hosts 2 --rate 500mbit\n"
           "timeout 40 $S launch --testbed $N -n 4 --per-host 2 --timeout 35 -- $S bench allreduce -b 1M -e 1M -n 60 -w 2 --check "
           ">$TMPDIR/tb$$.out 2>&1 & L=$!\n"
           "sleep 1; $S testbed set --name $N h1 --rate 50mbit; $S testbed set --name $N h1 --cpu 0.25\n"
           "kill -0 $L && echo degraded-while-running\n"
           "$S testbed status --name $N | grep '^h1 '\n"
           "sleep 1; $S testbed set --name $N h1 --rate 500mbit --cpu 0\n"
           "wait $L; echo launch-rc=$?\n"
           "grep -E '^\\[0\\] +1048576' $TMPDIR/tb$$.out; rm -f $TMPDIR/tb$$.out\n",
           S, name);
  setenv("TMPDIR", "/tmp", 0);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 55);
  check_gone(name);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, out);
  CHECK_CONTAINS(out, "degraded-while-running");
  CHECK_CONTAINS(out, "50mbit");
  CHECK_CONTAINS(out, "0.25(cgroup)");
  CHECK_CONTAINS(out, "launch-rc=0");
  /* nccl-tests row: ... #wrong columns (out-of-place and in-place) must be 0 */
  const char *row = strstr(out, "[0]      1048576");
  CHECK_MSG(row, "no result row: %s", out);
  /* [0] size count type redop algo | p50 p99 max algbw busbw #wrong | (the same in place) */
  char w1[32] = "", w2[32] = "";
  int k = sscanf(row, "%*s %*s %*s %*s %*s %*s | %*s %*s %*s %*s %*s %31s | %*s %*s %*s %*s %*s %31s", w1, w2);
  CHECK_MSG(k == 2, "unexpected row: %s", row);
  CHECK_MSG(!strcmp(w1, "0") && !strcmp(w2, "0"), "#wrong not 0: %s", row);
}

TEST_T(testbed_teardown_after_kill9_of_launcher, 60) {
  need_namespaces();
  char name[32], cmd[4096];
  tb_name(name, sizeof name);
  const char *S = shoal_test_cli();
  snprintf(cmd, sizeof cmd,
           "S=%s; N=%s; trap '$S testbed down --name $N >/dev/null 2>&1' EXIT\n"
           "$S testbed up --name $N --hosts 2 --rate 1gbit || exit 3\n"
           "$S testbed set --name $N h1 --cpu 0.5 --cpu-method stop || exit 4\n" /* a duty-cycle daemon to clean up too */
           "$S launch --testbed $N -n 4 --per-host 2 -- sleep 30 >/dev/null 2>&1 & L=$!\n"
           "i=0; while [ $i -lt 100 ] && [ \"$($S testbed status --name $N | awk '/^h[01] /{s+=$NF} END{print s}')\" != 4 ]; do "
           "sleep 0.05; i=$((i+1)); done\n"
           "echo before: $($S testbed status --name $N | awk '/^h[01] /{s+=$NF} END{print s}') ranks\n"
           "kill -9 $L; wait $L 2>/dev/null\n"
           "i=0; while [ $i -lt 100 ] && [ \"$($S testbed status --name $N | awk '/^h[01] /{s+=$NF} END{print s}')\" != 0 ]; do "
           "sleep 0.05; i=$((i+1)); done\n"
           "echo after-kill9: $($S testbed status --name $N | awk '/^h[01] /{s+=$NF} END{print s}') ranks\n"
           "$S testbed down --name $N && echo down-ok\n"
           "$S testbed status --name $N >/dev/null 2>&1 || echo status-says-gone\n"
           "$S testbed down --name $N 2>&1 | sed 's/^/second-down: /'\n",
           S, name);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 50);
  check_gone(name);
  CHECK_MSG(WIFEXITED(st), "status %d: %s", st, out);
  CHECK_CONTAINS(out, "before: 4 ranks");
  CHECK_CONTAINS(out, "after-kill9: 0 ranks"); /* the ranks die with their launcher */
  CHECK_CONTAINS(out, "down-ok");
  CHECK_CONTAINS(out, "status-says-gone");
  CHECK_CONTAINS(out, "second-down: shoal testbed: no testbed");
}

/* A refused `set` changes nothing (the CPU checks come before the rates are applied); host names are the
 * documented forms only; a damaged state file is reported at its first bad line. */
TEST_T(testbed_set_refused_changes_nothing, 60) {
  need_namespaces();
  char name[32], cmd[4096];
  tb_name(name, sizeof name);
  const char *S = shoal_test_cli();
  snprintf(cmd, sizeof cmd,
           "S=%s; N=%s; trap '$S testbed down --name $N >/dev/null 2>&1' EXIT\n"
           "$S testbed up --name $N --hosts 2 --rate 1gbit >/dev/null || exit 3\n"
           "$S testbed set --name $N h0 --rate 50mbit --cpu 0.001; echo set-rc=$?\n"
           "$S testbed status --name $N | awk '/^h0 /{print \"h0-egress:\", $5}'\n"
           "for h in h+1 'h 1' h-1 $N-1; do $S testbed set --name $N \"$h\" --rate 10mbit >/dev/null 2>&1; "
           "echo \"spec '$h' rc=$?\"; done\n"
           "$S testbed set --name $N $N-h1 --rate 20mbit && echo full-name-ok\n"
           "sed -i '1s/hosts 2/hosts x/' /run/shoal-testbed/$N/state\n"
           "$S testbed status --name $N 2>&1 | sed 's/^/status: /'\n",
           S, name);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 50);
  check_gone(name);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, out);
  CHECK_CONTAINS(out, "--cpu 0.001: at least 0.01");
  CHECK_CONTAINS(out, "set-rc=2");
  CHECK_CONTAINS(out, "h0-egress: 1gbit"); /* the refused command's --rate was not applied */
  CHECK_CONTAINS(out, "spec 'h+1' rc=2");
  CHECK_CONTAINS(out, "spec 'h 1' rc=2");
  CHECK_CONTAINS(out, "spec 'h-1' rc=2");
  char want[96];
  snprintf(want, sizeof want, "spec '%s-1' rc=2", name);
  CHECK_CONTAINS(out, want);
  CHECK_CONTAINS(out, "full-name-ok");
  snprintf(want, sizeof want, "status: shoal testbed: /run/shoal-testbed/%s/state:1: malformed line", name);
  CHECK_CONTAINS(out, want);
}

TEST_T(testbed_interrupted_up_rolls_back, 60) {
  need_namespaces();
  char name[32], cmd[2048];
  tb_name(name, sizeof name);
  const char *S = shoal_test_cli();
  /* 24 hosts take a while to create: SIGTERM once the state file records the third host lands mid-way */
  snprintf(cmd, sizeof cmd,
           "S=%s; N=%s\n"
           "$S testbed up --name $N --hosts 24 --racks 2 --oversub 4 & U=$!\n"
           "i=0; while [ $i -lt 1000 ] && ! grep -q \"^ns $N-h2$\" /run/shoal-testbed/$N/state 2>/dev/null; do "
           "sleep 0.01; i=$((i+1)); done\n"
           "kill -TERM $U; wait $U; echo up-rc=$?\n"
           "ls /run/netns | grep -c \"^$N-\" | sed 's/^/left: /'\n"
           "$S testbed down --name $N >/dev/null 2>&1; true\n"
           "$S testbed up --name $N --topo /nonexistent 2>&1; echo topo-rc=$?\n",
           S, name);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 50);
  check_gone(name);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, out);
  if (strstr(out, "up-rc=0")) shoal_test_skip("up finished before the signal arrived (machine too fast for this check)");
  CHECK_CONTAINS(out, "interrupted by");
  CHECK_CONTAINS(out, "rolling back");
  CHECK_CONTAINS(out, "up-rc=143");
  CHECK_CONTAINS(out, "left: 0");
  CHECK_CONTAINS(out, "--topo /nonexistent");
  CHECK_CONTAINS(out, "topo-rc=2");
}

/* Re-profiling while running: a training-like loop of 1 MiB allreduces on 4
 * hosts; one host's link is cut to a tenth while it runs. The link watch
 * must notice it from the allreduce times within 2 x SHOAL_REPROFILE_CALLS
 * calls after the change is in place, measure the links again, and the
 * chooser must then run the trees with that host a leaf of every tree. */
TEST_T(testbed_link_slowdown_noticed_and_choice_changes, 110) {
  need_namespaces();
  char name[32], cmd[4096];
  tb_name(name, sizeof name);
  const char *S = shoal_test_cli();
  snprintf(cmd, sizeof cmd,
           "set -e; S=%s; N=%s; O=$TMPDIR/tbw$$.out; trap '$S testbed down --name $N >/dev/null; rm -f $O' EXIT\n"
           "$S testbed up --name $N --hosts 4 --rate 1gbit >/dev/null\n"
           ": >$O  # before the background job opens it: the step count below reads it at once\n"
           "SHOAL_TUNE=force SHOAL_PROFILE_FLOWS=2 SHOAL_REPROFILE_CALLS=4 SHOAL_TIMEOUT=40 timeout 95 $S launch "
           "--testbed $N -n 4 --timeout 90 -- $S bench allreduce --steps 60 --step-ms 40 -b 1M >$O 2>&1 &\n"
           "pid=$!; steps() { grep -c '^\\[0\\] *[0-9]' $O || true; }\n"
           "i=0; while [ $(steps) -lt 6 ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done\n"
           "echo slowing-at $(steps)\n"
           "$S testbed set --name $N h3 --rate 100mbit >/dev/null\n"
           "echo slowed-at $(steps)\n"
           "rc=0; wait $pid || rc=$?; echo bench-rc=$rc\n"
           "sed -n 's/^\\[0\\] //p' $O\n"
           /* a failed run: every other rank's and the launcher's lines, which name the cause */
           "[ $rc = 0 ] || { echo '--- other ranks, launcher:'; grep -v '^\\[0\\]' $O | tail -60; }\n",
           S, name);
  setenv("TMPDIR", "/tmp", 0);
  int st = shoal_test_run_cmd(cmd, out, sizeof out, 105);
  check_gone(name);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, out);
  CHECK_CONTAINS(out, "bench-rc=0");
  const char *p = strstr(out, "slowed-at "), *p0 = strstr(out, "slowing-at ");
  CHECK_MSG(p && p0, "no mark: %s", out);
  /* the change takes a while (tc on both ends of the link): from step `slowing` to step `slowed` */
  int slowing = atoi(p0 + 11), slowed = atoi(p + 10), first_re = -1, last_re = 0, step = -1;
  char last_plan[256] = "";
  /* step lines: "  <step> <ms> <re-profiles> <algo> <plan...>" */
  for (const char *l = strstr(out, "re-profiles algo"); l && (l = strchr(l, '\n')); l++) {
    int k, re, n = 0;
    double ms;
    if (sscanf(l + 1, " %d %lf %d %n", &k, &ms, &re, &n) != 3 || !n) continue;
    if (k >= slowing && re > last_re && first_re < 0) first_re = k;
    if (k >= slowed && first_re >= 0) {
      const char *e = strchr(l + 1, '\n');
      size_t len = e ? (size_t)(e - (l + 1 + n)) : strlen(l + 1 + n);
      if (len >= sizeof last_plan) len = sizeof last_plan - 1;
      memcpy(last_plan, l + 1 + n, len);
      last_plan[len] = '\0';
    }
    last_re = re, step = k;
  }
  CHECK_MSG(step == 59, "not every step ran: %s", out);
  CHECK_MSG(slowed <= 45, "the slowdown came too late to be seen (step %d of 60): %s", slowed, out);
  /* the check that sees the change runs inside the call, at most 2 x 4 calls after it is in place (+1:
   * the step count is read when `testbed set` has returned, a step may be under way) */
  CHECK_MSG(first_re >= 0 && first_re <= slowed + 2 * 4 + 1,
            "re-profile after the slowdown at step %d: first at %d\n%s", slowed, first_re, out);
  /* rank 3 (on h3) is then a leaf of every tree */
  const char *lv = strstr(last_plan, "leaves in every tree:");
  int leaf3 = 0;
  for (const char *q = lv ? lv + 21 : NULL; q && *q;) {
    char *e;
    long r = strtol(q, &e, 10);
    if (e == q) break;
    leaf3 |= r == 3, q = e;
  }
  CHECK_MSG(strstr(last_plan, "trees") && leaf3, "plan at the end: '%s'\n%s", last_plan, out);
}
