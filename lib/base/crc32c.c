// SPDX-License-Identifier: GPL-2.0
/*
 * CRC-32C: the SSE4.2 crc32 instruction where the CPU has it (it computes
 * exactly the raw reflected update), three lanes at a time, else a
 * slice-by-8 table.
 */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "base/crc32c.h"

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
/*
 * The crc32 instruction takes 3 cycles but can start one a cycle: three
 * lanes of CRC32C_LANE bytes run side by side, then are joined. The raw
 * update is linear: crc(c, A B) = shift(crc(c, A), |B|) ^ crc(0, B), where
 * shift(x, n), the update of x by n zero bytes, is a linear map of x,
 * tabulated for n = CRC32C_LANE byte by byte.
 */
#define CRC32C_LANE 1024

static uint32_t lane_shift[4][256];
static pthread_once_t lane_once = PTHREAD_ONCE_INIT;

__attribute__((target("sse4.2"))) static uint32_t
crc32c_sse42_one(uint32_t crc, const unsigned char *p, size_t len)
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

static void crc32c_init_lane(void)
{
	static const unsigned char zeros[CRC32C_LANE];
	uint32_t bit_shift[32];
	int i, k, b;

	for (i = 0; i < 32; i++)
		bit_shift[i] = crc32c_sse42_one(1u << i, zeros, sizeof(zeros));
	for (k = 0; k < 4; k++) {
		for (b = 0; b < 256; b++) {
			lane_shift[k][b] = 0;
			for (i = 0; i < 8; i++)
				if (b & (1 << i))
					lane_shift[k][b] ^=
						bit_shift[8 * k + i];
		}
	}
}

static uint32_t shift_lane(uint32_t x)
{
	return lane_shift[0][x & 0xff] ^ lane_shift[1][(x >> 8) & 0xff] ^
	       lane_shift[2][(x >> 16) & 0xff] ^ lane_shift[3][x >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t
crc32c_sse42(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c0 = crc, c1, c2, w0, w1, w2;
	size_t i;

	if (len >= 3 * CRC32C_LANE)
		pthread_once(&lane_once, crc32c_init_lane);
	while (len >= 3 * CRC32C_LANE) {
		c1 = c2 = 0;
		for (i = 0; i < CRC32C_LANE; i += 8) {
			memcpy(&w0, p + i, 8);
			memcpy(&w1, p + CRC32C_LANE + i, 8);
			memcpy(&w2, p + 2 * CRC32C_LANE + i, 8);
			c0 = __builtin_ia32_crc32di(c0, w0);
			c1 = __builtin_ia32_crc32di(c1, w1);
			c2 = __builtin_ia32_crc32di(c2, w2);
		}
		c0 = shift_lane(shift_lane(c0) ^ c1) ^ c2;
		p += 3 * CRC32C_LANE;
		len -= 3 * CRC32C_LANE;
	}
	return crc32c_sse42_one(c0, p, len);
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
