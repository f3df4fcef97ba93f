// SPDX-License-Identifier: GPL-2.0
/*
 * JSON strings for the commands' --format=json output.
 */
#include <stdio.h>

#include "commands.h"

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

void json_fprint_string(FILE *out, const char *str)
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

void json_print_string(const char *str)
{
	json_fprint_string(stdout, str);
}
