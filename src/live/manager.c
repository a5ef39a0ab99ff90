/* Helpers over the cluster-manager interface's types (manager.h). */
#include "live/manager.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void shoal__live_nodes_free(shoal_live_nodes_t *n) {
  if (!n) return;
  free(n->node);
  n->node = NULL;
  n->n = 0;
}

void shoal__live_jobs_free(shoal_live_jobs_t *j) {
  if (!j) return;
  for (int i = 0; i < j->n; i++) free(j->job[i].use);
  free(j->job);
  j->job = NULL;
  j->n = 0;
}

void shoal__live_shares_free(shoal_live_shares_t *s) {
  if (!s) return;
  free(s->share);
  s->share = NULL;
  s->n = 0;
}

const shoal_live_job_t *shoal__live_jobs_find(const shoal_live_jobs_t *jobs, long id) {
  for (int i = 0; jobs && i < jobs->n; i++)
    if (jobs->job[i].id == id) return &jobs->job[i];
  return NULL;
}

int shoal__live_list_has(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; p && *p;) {
    const char *e = strchr(p, ',');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (l == n && !strncmp(p, name, n)) return 1;
    if (!e) break;
    p = e + 1;
  }
  return 0;
}

void shoal__live_place_str(const shoal_live_place_t *p, char *buf, size_t cap) {
  size_t k = 0;
  if (cap) buf[0] = 0;
  for (int i = 0; i < p->n && k < cap; i++) k += (size_t)snprintf(buf + k, cap - k, "%s%s", i ? "," : "", p->node[i]);
}

void shoal__live_manager_destroy(shoal_live_manager_t *m) {
  if (m && m->ops && m->ops->destroy) m->ops->destroy(m->impl);
  if (m) m->ops = NULL, m->impl = NULL;
}
