/* The job-interference model: how much a job slows down when other jobs share
 * a resource with it (docs/learned-placement.md, "Interference model").
 *
 *   slowdown(j) = 1 + sum over co-runners k, over the levels L that j and k share,
 *                     of g_L(class(j), class(k))
 *   g_L(a, b)   = softplus(alpha_L[a] + beta_L[b] + u_L[a] . v_L[b])
 *
 * g_L(a, b) is what one co-runner of class b adds to the slowdown of a job of
 * class a when they share level L; alpha is a's sensitivity, beta b's pressure,
 * u . v their interaction (rank R). A class that a level does not list does
 * not use that resource: it neither suffers nor causes interference there.
 * Co-runners add up (only pairs are measured).
 *
 * The parameters are fitted from measurements (experiments/interference/fit.py)
 * and read from a JSON file:
 *   {"format": "shoal-interference 1", "source": "...", "rank": R,
 *    "levels": {"socket": {"classes": ["mlp", ...], "alpha": [...], "beta": [...],
 *                          "u": [[...], ...], "v": [[...], ...]}, ...},
 *    "models": {"resnet50": "cnn", ...}, "default_class": "cnn"}
 * Levels: slot (one accelerator), core (time-shared CPU cores), socket (last-
 * level cache, memory bandwidth), nic (the host's network link), uplink (the
 * rack's uplink). "models" maps the speed model's job model names to classes;
 * a name it does not list is a class of that name, else default_class, else
 * no class (no interference). */
#ifndef SHOAL_SCHED_MODEL_INTERFERENCE_H
#define SHOAL_SCHED_MODEL_INTERFERENCE_H

#include <stddef.h>

typedef enum shoal_ilevel {
  SHOAL_IL_SLOT = 0,
  SHOAL_IL_CORE,
  SHOAL_IL_SOCKET,
  SHOAL_IL_NIC,
  SHOAL_IL_UPLINK,
  SHOAL_IL_COUNT
} shoal_ilevel_t;

#define SHOAL_INTERFERENCE_MAX_CLASSES 64
#define SHOAL_INTERFERENCE_MAX_RANK 8

typedef struct shoal_interference shoal_interference_t;

/* The file at path (errors name the file, line and key). */
int shoal__interference_load(const char *path, shoal_interference_t **out);
/* The same from memory; name is used in messages. */
int shoal__interference_parse(const char *name, const char *text, size_t len, shoal_interference_t **out);
/* The model measured on shoal's testbed that ships with shoal (data/interference-measured.json). */
int shoal__interference_shipped(shoal_interference_t **out);
void shoal__interference_free(shoal_interference_t *m);

/* Name of a level ("socket"), NULL if out of range; the level called name, -1 if none. */
const char *shoal__ilevel_name(int level);
int shoal__ilevel_find(const char *name);

/* Classes of the model (all levels together), their names. */
int shoal__interference_nclasses(const shoal_interference_t *m);
const char *shoal__interference_class_name(const shoal_interference_t *m, int cls);
/* The class of a job model name (see above), -1 if none. */
int shoal__interference_class_of(const shoal_interference_t *m, const char *model_name);
/* 1 if the model has parameters for level (some class uses it). */
int shoal__interference_has_level(const shoal_interference_t *m, int level);
/* g_L(cls, co): what one co-runner of class co adds to the slowdown of a job of
 * class cls sharing level L with it; 0 when either class is -1 or does not use L. */
double shoal__interference_term(const shoal_interference_t *m, int level, int cls, int co);
/* The file or "shipped" it came from, and its "source" text. */
const char *shoal__interference_origin(const shoal_interference_t *m);
const char *shoal__interference_source(const shoal_interference_t *m);

#endif
