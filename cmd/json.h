/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The commands' --format=json output: one emitter, so that every command
 * escapes strings alike and writes valid JSON whatever its data holds.
 *
 *	struct json_writer w;
 *
 *	json_init(&w, stdout, 1);
 *	json_object_begin(&w, NULL);
 *	json_string(&w, "path", path);
 *	json_array_begin(&w, "extents");
 *	...
 *	json_array_end(&w);
 *	json_object_end(&w);	(ends the line)
 *
 * A member of an object takes its key; a value in an array or the top
 * value takes NULL.
 */
#ifndef ENCIO_CMD_JSON_H
#define ENCIO_CMD_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_DEPTH_MAX 16

struct json_writer {
	FILE *out;
	/* containers opened at this depth or deeper are written on one line */
	unsigned int flat_depth;
	unsigned int depth;
	bool has_member[JSON_DEPTH_MAX];
};

/*
 * @flat_depth 0: the whole value on one line (a summary a script reads
 * line by line); 1: each member of the top object on a line of its own;
 * 2: members of those too, and so on, indented by two spaces a level.
 */
void json_init(struct json_writer *w, FILE *out, unsigned int flat_depth);

void json_object_begin(struct json_writer *w, const char *key);
void json_object_end(struct json_writer *w);
void json_array_begin(struct json_writer *w, const char *key);
void json_array_end(struct json_writer *w);

/* @value NULL is null. Bytes that are not UTF-8 become U+0080..U+00FF. */
void json_string(struct json_writer *w, const char *key, const char *value);
void json_u64(struct json_writer *w, const char *key, uint64_t value);
void json_i64(struct json_writer *w, const char *key, int64_t value);
void json_bool(struct json_writer *w, const char *key, bool value);
/* A number with @decimals digits after the point (seconds, rates). */
void json_double(struct json_writer *w, const char *key, double value,
		 int decimals);
void json_null(struct json_writer *w, const char *key);

#endif
