// SPDX-License-Identifier: GPL-2.0
/*
 * cmd/json.c, the emitter of every --format=json: escaping, nesting,
 * commas and line breaks at each flat depth, numbers JSON has no word for.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json.h"

struct out {
	char *buf;
	size_t len;
	FILE *f;
	struct json_writer w;
};

static void out_open(struct out *o, unsigned int flat_depth)
{
	o->buf = NULL;
	o->f = open_memstream(&o->buf, &o->len);
	assert_non_null(o->f);
	json_init(&o->w, o->f, flat_depth);
}

/* The text written, to be freed. */
static char *out_close(struct out *o)
{
	assert_int_equal(fclose(o->f), 0);
	return o->buf;
}

static void string_of(const char *value, const char *want)
{
	struct out o;
	char *got;

	out_open(&o, 0);
	json_object_begin(&o.w, NULL);
	json_string(&o.w, "k", value);
	json_object_end(&o.w);
	got = out_close(&o);
	assert_string_equal(got, want);
	free(got);
}

static void test_escapes(void **state)
{
	(void)state;
	string_of("plain", "{\"k\": \"plain\"}\n");
	string_of("a\"b\\c", "{\"k\": \"a\\\"b\\\\c\"}\n");
	string_of("tab\tnl\n\x01", "{\"k\": \"tab\\u0009nl\\u000a\\u0001\"}\n");
	/* a byte that is not UTF-8 is its own code point */
	string_of("x\xff", "{\"k\": \"x\\u00ff\"}\n");
	string_of("\xc3\xa9t\xc3\xa9", "{\"k\": \"\xc3\xa9t\xc3\xa9\"}\n");
	/* overlong and surrogate forms are not taken as UTF-8 */
	string_of("\xc0\xaf", "{\"k\": \"\\u00c0\\u00af\"}\n");
	string_of("\xed\xa0\x80", "{\"k\": \"\\u00ed\\u00a0\\u0080\"}\n");
	string_of(NULL, "{\"k\": null}\n");
}

static void fill(struct json_writer *w)
{
	json_object_begin(w, NULL);
	json_u64(w, "u", 18446744073709551615ULL);
	json_i64(w, "i", -3);
	json_bool(w, "t", true);
	json_array_begin(w, "a");
	json_object_begin(w, NULL);
	json_null(w, "n");
	json_object_end(w);
	json_object_begin(w, NULL);
	json_object_end(w);
	json_array_end(w);
	json_array_begin(w, "e");
	json_array_end(w);
	json_double(w, "d", 1.5, 3);
	json_object_end(w);
}

static void layout(unsigned int flat_depth, const char *want)
{
	struct out o;
	char *got;

	out_open(&o, flat_depth);
	fill(&o.w);
	got = out_close(&o);
	assert_string_equal(got, want);
	free(got);
}

static void test_flat_depths(void **state)
{
	(void)state;
	layout(0, "{\"u\": 18446744073709551615, \"i\": -3, \"t\": true, "
		  "\"a\": [{\"n\": null}, {}], \"e\": [], \"d\": 1.500}\n");
	layout(1, "{\n"
		  "  \"u\": 18446744073709551615,\n"
		  "  \"i\": -3,\n"
		  "  \"t\": true,\n"
		  "  \"a\": [{\"n\": null}, {}],\n"
		  "  \"e\": [],\n"
		  "  \"d\": 1.500\n"
		  "}\n");
	layout(2, "{\n"
		  "  \"u\": 18446744073709551615,\n"
		  "  \"i\": -3,\n"
		  "  \"t\": true,\n"
		  "  \"a\": [\n"
		  "    {\"n\": null},\n"
		  "    {}\n"
		  "  ],\n"
		  "  \"e\": [],\n"
		  "  \"d\": 1.500\n"
		  "}\n");
}

/* JSON has no NaN nor infinity. */
static void test_non_finite(void **state)
{
	struct out o;
	char *got;

	(void)state;
	out_open(&o, 0);
	json_array_begin(&o.w, NULL);
	json_double(&o.w, NULL, 0.0 / 0.0, 2);
	json_double(&o.w, NULL, 1.0 / 0.0, 2);
	json_double(&o.w, NULL, -2.25, 1);
	json_array_end(&o.w);
	got = out_close(&o);
	assert_string_equal(got, "[null, null, -2.2]\n");
	free(got);
}

/* Two values written one after the other are two lines. */
static void test_values_in_a_row(void **state)
{
	struct out o;
	char *got;

	(void)state;
	out_open(&o, 0);
	json_object_begin(&o.w, NULL);
	json_object_end(&o.w);
	json_object_begin(&o.w, NULL);
	json_u64(&o.w, "n", 1);
	json_object_end(&o.w);
	got = out_close(&o);
	assert_string_equal(got, "{}\n{\"n\": 1}\n");
	free(got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escapes),
		cmocka_unit_test(test_flat_depths),
		cmocka_unit_test(test_non_finite),
		cmocka_unit_test(test_values_in_a_row),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
