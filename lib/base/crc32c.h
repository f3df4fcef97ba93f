/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ENCIO_CRC32C_H
#define ENCIO_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * CRC-32C (Castagnoli), reflected, as a raw update: no inversion before or
 * after. The send stream uses it with seed 0 (fs/btrfs/send.c).
 */
uint32_t crc32c(uint32_t crc, const void *data, size_t len);

#endif
