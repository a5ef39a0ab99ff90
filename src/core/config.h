/* The SHOAL_* configuration variables: one table (config_table.c) documents
 * them all, `shoal config` prints it, and these readers parse values with
 * errors that name the variable and the value. An optional file of VAR=value
 * lines (SHOAL_CONF_FILE, default ~/.shoal.conf) supplies defaults; the real
 * environment always wins. */
#ifndef SHOAL_CORE_CONFIG_H
#define SHOAL_CORE_CONFIG_H

#include <stddef.h>
#include <stdio.h>

typedef struct shoal__config_var {
  const char *name;    /* "SHOAL_TIMEOUT" */
  const char *def;     /* default as text, "" if none */
  const char *area;    /* "comm", "sched", ... */
  const char *help;    /* one line */
} shoal__config_var_t;

extern const shoal__config_var_t shoal__config_vars[];
extern const size_t shoal__config_nvars;

/* The raw value: environment, then the config file; NULL when unset. */
const char *shoal__config_raw(const char *name);
/* 0, or SHOAL_ERR_CONFIG when SHOAL_CONF_FILE names a file that cannot be read or the file has a
 * malformed line (file:line in the message); shoal_comm_init refuses to start then. Elsewhere these are
 * logged once (WARN), as are lines that set unknown variables or one variable twice. */
int shoal__config_check(void);
/* The problems of SHOAL_CONF_FILE (read now if not yet): the first cap messages into msgs, and the
 * count of all of them. The logger reports them once, when it configures. */
int shoal__config_problems(const char **msgs, int cap);
/* rc as is, or (a failure parsing NAME's value that came from SHOAL_CONF_FILE) with " (set in FILE:LINE)"
 * added to the last error: for callers that parse a raw value themselves. */
int shoal__config_from_where(const char *name, int rc);

/* Parsers. On a malformed value they return SHOAL_ERR_CONFIG with a message
 * like "SHOAL_TIMEOUT='abc': not a number" and leave *out untouched. When the
 * variable is unset, *out = def and 0 is returned. */
int shoal__config_long(const char *name, long def, long min, long max, long *out);
int shoal__config_double(const char *name, double def, double min, double max, double *out);
int shoal__config_bool(const char *name, int def, int *out);
const char *shoal__config_str(const char *name, const char *def);

/* A decimal number at the start of s (strtod takes hex, inf and nan too: not here): 0, *out and *end
 * after it; -1 if there is none, or it overflows. What may follow is the caller's rule. */
int shoal__strtod_decimal(const char *s, double *out, const char **end);

/* 1 if the sep-separated list s is empty or has an empty item ("", ",a", "a,", "a,,b"): strtok and the
 * like skip those silently. */
int shoal__list_has_empty(const char *s, char sep);

/* Parse one value of any kind from a string (used for launcher variables too). */
int shoal__parse_long(const char *what, const char *s, long min, long max, long *out);
int shoal__parse_double(const char *what, const char *s, double min, double max, double *out);
/* A link rate in bits/s: decimal number and unit gbit|mbit|kbit|bit (or G, M, k, none), as tc writes them;
 * 0 (unshaped) or 8 kbit/s to 1000 Gbit/s. The options' RATE kind and the flow topology file read it. */
int shoal__parse_rate(const char *what, const char *s, double *out);

/* Print the table: name, current value, default, help. markdown != 0 prints
 * a Markdown table (the README's table is checked against it by a test). */
void shoal__config_print(FILE *f, int markdown);

#endif
