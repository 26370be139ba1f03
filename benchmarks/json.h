/* json.h - a small streaming JSON writer (commas and nesting tracked for you). */
#ifndef JSON_H
#define JSON_H

#include <stdio.h>

typedef struct {
    FILE *f;
    int depth;
    int first[64];      /* nothing written yet at this depth */
} json_t;

void json_init(json_t *j, FILE *f);
void json_obj(json_t *j, const char *key);      /* key NULL inside an array or at top level */
void json_arr(json_t *j, const char *key);
void json_end(json_t *j, char close);           /* '}' or ']' */
void json_str(json_t *j, const char *key, const char *v);   /* v NULL: null */
void json_num(json_t *j, const char *key, double v);        /* NaN/inf: null */
void json_int(json_t *j, const char *key, long long v);
void json_bool(json_t *j, const char *key, int v);

#endif
