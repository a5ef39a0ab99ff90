/* A small JSON reader (RFC 8259 subset good enough for config files and
 * Gavel's throughput table): builds a tree; every node remembers its line so
 * that callers can report "file:line: ..." errors. Numbers are doubles;
 * strings support the usual escapes (\uXXXX is decoded to UTF-8). Depth is
 * limited (64) so hostile input cannot exhaust the stack. */
#ifndef SHOAL_SCHED_MODEL_JSON_H
#define SHOAL_SCHED_MODEL_JSON_H

#include <stddef.h>

typedef enum { SHOAL_JSON_NULL, SHOAL_JSON_BOOL, SHOAL_JSON_NUM, SHOAL_JSON_STR, SHOAL_JSON_ARR, SHOAL_JSON_OBJ } shoal_json_type_t;

typedef struct shoal_json shoal_json_t;
struct shoal_json {
  shoal_json_type_t type;
  int line;
  double num;             /* NUM, BOOL (0/1) */
  char *str;              /* STR value */
  char *key;              /* member name when inside an object */
  int n;                  /* ARR/OBJ children */
  shoal_json_t **kids;
};

/* Parse text[0..len); `name` is used in error messages ("name:line: ..."). */
int  shoal__json_parse(const char *name, const char *text, size_t len, shoal_json_t **out);
int  shoal__json_parse_file(const char *path, shoal_json_t **out);
void shoal__json_free(shoal_json_t *j);
/* Member of an object by name (first match), NULL if absent or not an object. */
const shoal_json_t *shoal__json_get(const shoal_json_t *obj, const char *key);

#endif
