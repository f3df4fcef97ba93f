// SPDX-License-Identifier: GPL-2.0
/*
 * CRC-32C: the SSE4.2 crc32 instruction where the CPU has it (it computes
 * exactly the raw reflected update), else a slice-by-8 table.
 */
#include <stdbool.h>
#include <string.h>

#include "crc32c.h"

#define CRC32C_POLY 0x82F63B78u

static uint32_t table[8][256];
static bool table_ready;

static void crc32c_init_table(void)
{
	uint32_t crc;
	int i, j;

	for (i = 0; i < 256; i++) {
		crc = i;
		for (j = 0; j < 8; j++)
			crc = crc & 1 ? (crc >> 1) ^ CRC32C_POLY : crc >> 1;
		table[0][i] = crc;
	}
	for (i = 0; i < 256; i++)
		for (j = 1; j < 8; j++)
			table[j][i] = (table[j - 1][i] >> 8) ^
				      table[0][table[j - 1][i] & 0xff];
	table_ready = true;
}

static uint32_t crc32c_soft(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t word;

	if (!table_ready)
		crc32c_init_table();
	while (len >= 8) {
		memcpy(&word, p, 8);
		word ^= crc;
		crc = table[7][word & 0xff] ^ table[6][(word >> 8) & 0xff] ^
		      table[5][(word >> 16) & 0xff] ^
		      table[4][(word >> 24) & 0xff] ^
		      table[3][(word >> 32) & 0xff] ^
		      table[2][(word >> 40) & 0xff] ^
		      table[1][(word >> 48) & 0xff] ^ table[0][word >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t
crc32c_sse42(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t crc64 = crc, word;

	while (len >= 8) {
		memcpy(&word, p, 8);
		crc64 = __builtin_ia32_crc32di(crc64, word);
		p += 8;
		len -= 8;
	}
	crc = crc64;
	while (len--)
		crc = __builtin_ia32_crc32qi(crc, *p++);
	return crc;
}

uint32_t crc32c(uint32_t crc, const void *data, size_t len)
{
	static int have_sse42 = -1;

	if (have_sse42 < 0)
		have_sse42 = __builtin_cpu_supports("sse4.2");
	if (have_sse42)
		return crc32c_sse42(crc, data, len);
	return crc32c_soft(crc, data, len);
}
#else
uint32_t crc32c(uint32_t crc, const void *data, size_t len)
{
	return crc32c_soft(crc, data, len);
}
#endif
