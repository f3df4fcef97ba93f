// SPDX-License-Identifier: GPL-2.0
/*
 * The commands' --format=json output (json.h): strings escaped, commas and
 * line breaks placed by the emitter, not by each command's printf.
 */
#include <math.h>
#include <stdio.h>

#include "json.h"

/* Length of the valid UTF-8 sequence at @s, 0 if it is not one. */
static size_t utf8_len(const unsigned char *s)
{
	size_t len, i;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4;
	else
		return 0;
	for (i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) ||
	    (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
		return 0; /* overlong, surrogate or beyond U+10FFFF */
	return len;
}

static void json_write_string(FILE *out, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t len;

	fputc('"', out);
	while (*s) {
		if (*s == '"' || *s == '\\') {
			fprintf(out, "\\%c", *s++);
			continue;
		}
		len = *s < 0x20 ? 0 : utf8_len(s);
		if (!len) {
			/* control bytes, and bytes that are not UTF-8 */
			fprintf(out, "\\u%04x", *s++);
			continue;
		}
		fwrite(s, 1, len, out);
		s += len;
	}
	fputc('"', out);
}

void json_init(struct json_writer *w, FILE *out, unsigned int flat_depth)
{
	w->out = out;
	w->flat_depth = flat_depth;
	w->depth = 0;
	w->has_member[0] = false;
}

/* The members at the current depth go on one line. */
static bool json_flat(const struct json_writer *w)
{
	return w->depth > w->flat_depth;
}

/* The comma, line break and indent before a value, and its key. */
static void json_member(struct json_writer *w, const char *key)
{
	if (w->depth) {
		if (w->has_member[w->depth])
			fputc(',', w->out);
		if (json_flat(w))
			fputs(w->has_member[w->depth] ? " " : "", w->out);
		else
			fprintf(w->out, "\n%*s", 2 * w->depth, "");
		w->has_member[w->depth] = true;
	}
	if (key) {
		json_write_string(w->out, key);
		fputs(": ", w->out);
	}
}

static void json_open(struct json_writer *w, const char *key, char c)
{
	json_member(w, key);
	fputc(c, w->out);
	if (w->depth + 1 < JSON_DEPTH_MAX)
		w->depth++;
	w->has_member[w->depth] = false;
}

static void json_close(struct json_writer *w, char c)
{
	bool line_break = w->has_member[w->depth] && !json_flat(w);

	if (w->depth)
		w->depth--;
	if (line_break)
		fprintf(w->out, "\n%*s", 2 * w->depth, "");
	fputc(c, w->out);
	if (!w->depth)
		fputc('\n', w->out);
}

void json_object_begin(struct json_writer *w, const char *key)
{
	json_open(w, key, '{');
}

void json_object_end(struct json_writer *w)
{
	json_close(w, '}');
}

void json_array_begin(struct json_writer *w, const char *key)
{
	json_open(w, key, '[');
}

void json_array_end(struct json_writer *w)
{
	json_close(w, ']');
}

void json_string(struct json_writer *w, const char *key, const char *value)
{
	json_member(w, key);
	if (value)
		json_write_string(w->out, value);
	else
		fputs("null", w->out);
}

void json_u64(struct json_writer *w, const char *key, uint64_t value)
{
	json_member(w, key);
	fprintf(w->out, "%llu", (unsigned long long)value);
}

void json_i64(struct json_writer *w, const char *key, int64_t value)
{
	json_member(w, key);
	fprintf(w->out, "%lld", (long long)value);
}

void json_bool(struct json_writer *w, const char *key, bool value)
{
	json_member(w, key);
	fputs(value ? "true" : "false", w->out);
}

/* JSON has no NaN nor infinity: null stands for a number not known. */
void json_double(struct json_writer *w, const char *key, double value,
		 int decimals)
{
	json_member(w, key);
	if (isfinite(value))
		fprintf(w->out, "%.*f", decimals, value);
	else
		fputs("null", w->out);
}

void json_null(struct json_writer *w, const char *key)
{
	json_member(w, key);
	fputs("null", w->out);
}
