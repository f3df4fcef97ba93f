// SPDX-License-Identifier: GPL-2.0
/*
 * Resume points: their fingerprint, their packed form and their token.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/le_bytes.h"
#include "stream/resume.h"

/*
 * Every command's crc32c covers all its bytes; the fingerprint mixes the
 * type, length and crc32c of each in order, so a regenerated stream that
 * differs anywhere before the position, even by one command's order,
 * gives another one.
 */
uint64_t resume_fingerprint_add(uint64_t fp, uint16_t type, uint32_t len,
				uint32_t crc)
{
	uint64_t v = ((uint64_t)crc << 32 | len) ^ ((uint64_t)type << 48);

	fp ^= v + 0x9e3779b97f4a7c15ULL + (fp << 6) + (fp >> 2);
	fp ^= fp >> 31;
	fp *= 0xbf58476d1ce4e5b9ULL;
	fp ^= fp >> 29;
	return fp;
}

static uint8_t *put64(uint8_t *p, uint64_t v)
{
	le_put64(p, v);
	return p + sizeof(v);
}

size_t resume_point_pack(const struct resume_point *p, uint8_t *buf)
{
	size_t name_len = strnlen(p->name, NAME_MAX);
	uint8_t *q = buf;

	*q++ = RESUME_TOKEN_VERSION;
	memcpy(q, p->uuid, BTRFS_UUID_SIZE);
	q = put64(q + BTRFS_UUID_SIZE, p->ctransid);
	memcpy(q, p->parent_uuid, BTRFS_UUID_SIZE);
	q = put64(q + BTRFS_UUID_SIZE, p->parent_ctransid);
	q = put64(q, p->version);
	q = put64(q, p->position);
	q = put64(q, p->fingerprint);
	q = put64(q, p->shape);
	q = put64(q, p->commands);
	q = put64(q, p->layout);
	le_put32(q, p->flags);
	q += 4;
	*q++ = (uint8_t)name_len;
	memcpy(q, p->name, name_len);
	q += name_len;
	q = put64(q, p->anchor.creates);
	q = put64(q, p->anchor.ino);
	q = put64(q, p->anchor.position);
	q = put64(q, p->anchor.fingerprint);
	q = put64(q, p->anchor.shape);
	q = put64(q, p->anchor.commands);
	return (size_t)(q - buf);
}

static void unpack_anchor(const uint8_t *q, struct resume_anchor *a)
{
	a->creates = le_get64(q);
	a->ino = le_get64(q + 8);
	a->position = le_get64(q + 16);
	a->fingerprint = le_get64(q + 24);
	a->shape = le_get64(q + 32);
	a->commands = le_get64(q + 40);
}

int resume_point_unpack(const uint8_t *buf, size_t len, struct resume_point *p,
			size_t *used)
{
	const size_t fixed = 1 + 2 * (BTRFS_UUID_SIZE + 8) + 6 * 8 + 4 + 1;
	const size_t anchor = 6 * 8;
	const uint8_t *q = buf + 1;
	size_t name_len, tail;

	if (len < fixed || (buf[0] != RESUME_TOKEN_VERSION &&
			    buf[0] != RESUME_TOKEN_VERSION - 1))
		return -EINVAL;
	tail = buf[0] == RESUME_TOKEN_VERSION ? anchor : 0;
	name_len = buf[fixed - 1];
	if (!name_len || len < fixed + name_len + tail)
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	memcpy(p->uuid, q, BTRFS_UUID_SIZE);
	p->ctransid = le_get64(q + BTRFS_UUID_SIZE);
	q += BTRFS_UUID_SIZE + 8;
	memcpy(p->parent_uuid, q, BTRFS_UUID_SIZE);
	p->parent_ctransid = le_get64(q + BTRFS_UUID_SIZE);
	q += BTRFS_UUID_SIZE + 8;
	if (le_get64(q) > UINT32_MAX)
		return -EINVAL;
	p->version = (uint32_t)le_get64(q);
	p->position = le_get64(q + 8);
	p->fingerprint = le_get64(q + 16);
	p->shape = le_get64(q + 24);
	p->commands = le_get64(q + 32);
	p->layout = le_get64(q + 40);
	p->flags = le_get32(q + 48);
	if (p->flags & ~RESUME_POINT_APPEND)
		return -EINVAL;
	memcpy(p->name, buf + fixed, name_len);
	p->name[name_len] = '\0';
	if (strlen(p->name) != name_len || strchr(p->name, '/'))
		return -EINVAL;
	if (tail)
		unpack_anchor(buf + fixed + name_len, &p->anchor);
	else
		p->anchor.creates = RESUME_ANCHOR_UNKNOWN;
	*used = fixed + name_len + tail;
	return 0;
}

void resume_token_encode(const struct resume_point *p, char *token)
{
	uint8_t buf[RESUME_POINT_PACKED_MAX + 4];
	size_t len = resume_point_pack(p, buf), i;
	uint32_t crc = htole32(crc32c(0, buf, len));

	memcpy(buf + len, &crc, sizeof(crc));
	len += sizeof(crc);
	token += sprintf(token, "%u-", RESUME_TOKEN_VERSION);
	for (i = 0; i < len; i++)
		token += sprintf(token, "%02x", buf[i]);
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int resume_token_decode(const char *token, struct resume_point *p)
{
	uint8_t buf[RESUME_POINT_PACKED_MAX + 4];
	size_t hex_len, len, i, used;
	uint32_t crc;
	int hi, lo, version;

	version = token[0] - '0';
	if ((version != RESUME_TOKEN_VERSION &&
	     version != RESUME_TOKEN_VERSION - 1) ||
	    token[1] != '-')
		return -EINVAL;
	token += 2;
	hex_len = strlen(token);
	if (hex_len % 2 || hex_len / 2 > sizeof(buf) || hex_len / 2 < 5)
		return -EINVAL;
	len = hex_len / 2;
	for (i = 0; i < len; i++) {
		hi = hex_digit(token[2 * i]);
		lo = hex_digit(token[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		buf[i] = (uint8_t)(hi << 4 | lo);
	}
	len -= sizeof(crc);
	memcpy(&crc, buf + len, sizeof(crc));
	if (le32toh(crc) != crc32c(0, buf, len))
		return -EINVAL;
	if (buf[0] != version || resume_point_unpack(buf, len, p, &used) ||
	    used != len)
		return -EINVAL;
	return 0;
}
