/* Placing the ranks of `shoal launch --testbed` on a testbed's hosts. */
#include <stdlib.h>
#include <string.h>

#include "testbed.h"

int shoal__tb_plan(const char *name, const char *hosts, int n, int per_host, const char *place, tb_plan_t *p,
                   char *err, size_t cap) {
  memset(p, 0, sizeof *p);
  if (shoal__tb_load(name, &p->tb, err, cap)) return -1;
  if (n < 1 || n > 4096) return shoal__tb_fail(err, cap, "--testbed: %d ranks (1..4096)", n);
  int list[TB_MAX_HOSTS], nl = 0;
  if (hosts && *hosts) {
    char *dup = strdup(hosts), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
      int h = shoal__tb_host_index(&p->tb, t);
      if (h < 0 || nl == TB_MAX_HOSTS) {
        shoal__tb_fail(err, cap, "--hosts: '%s' is not a host of testbed '%s' (h0..h%d)", t, name, p->tb.nhosts - 1);
        free(dup);
        return -1;
      }
      for (int k = 0; k < nl; k++)
        if (list[k] == h) {
          shoal__tb_fail(err, cap, "--hosts: host '%s' given twice", t);
          free(dup);
          return -1;
        }
      list[nl++] = h;
    }
    free(dup);
  } else {
    for (int h = 0; h < p->tb.nhosts; h++) list[nl++] = h;
  }
  if (per_host <= 0) per_host = (n + nl - 1) / nl;
  int used = (n + per_host - 1) / per_host;
  if (used > nl)
    return shoal__tb_fail(err, cap, "--testbed %s: %d ranks at %d per host need %d hosts; %d available", name, n, per_host, used, nl);
  int rr = 0;
  if (!place || !strcmp(place, "block")) rr = 0;
  else if (!strcmp(place, "rr")) rr = 1;
  else return shoal__tb_fail(err, cap, "--place '%s': expected block or rr", place);
  p->n = n;
  for (int r = 0; r < n; r++) {
    int h = list[rr ? r % used : r / per_host];
    p->host_of[r] = h;
    p->local_rank[r] = p->local_size[h]++;
  }
  return 0;
}
