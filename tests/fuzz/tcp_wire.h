/* tcp_wire.h - what the tcp wire fuzz target (tcp_wire_fuzz.c) shares with
 * its standalone driver (driver.c): the entry point, the input builders and
 * the final health check. */
#ifndef LOOM_TEST_TCP_WIRE_H
#define LOOM_TEST_TCP_WIRE_H

#include <stddef.h>
#include <stdint.h>

/* The driver's interface (fz_generate: a handshake, then frames of every
 * kind; fz_final_check: the exchanges with the legitimate peer that every
 * 256th input runs; fz_report: inputs, whole frames, answers). */
#include "target.h"

/* Markers in an input (README.md): an 8-byte little-endian value whose
 * upper half is one of these.  The first five take a live value before the
 * bytes are sent, the lower half being a signed offset (addresses), an xor
 * (keys) or an index; the last two are taken out and shape the sending. */
#define TW_MARK_ADDR_RW 0x4c4d4131u /* "LMA1": the read-write region + off */
#define TW_MARK_ADDR_RO 0x4c4d4132u /* "LMA2": the read-only region + off */
#define TW_MARK_KEY_RW  0x4c4d4b31u /* "LMK1": its key ^ low */
#define TW_MARK_KEY_RO  0x4c4d4b32u /* "LMK2" */
#define TW_MARK_RNDV    0x4c4d5248u /* "LMRH": handle of the low-th next rendezvous */
#define TW_MARK_SPLIT   0x4c4d5350u /* "LMSP": what follows is a second peer's */
#define TW_MARK_PAUSE   0x4c4d5041u /* "LMPA": the other peer's next part goes first */

/* The byte of the handshake that picks the address it claims (the low
 * byte of the port): 0-2 a dead loopback port, 3 the target's own. */
#define TW_SELECTOR 35

/* The tag a receive of 70,000 bytes alone takes (others: top bits clear). */
#define TW_BIG_TAG (1ULL << 62)

#define TW_MR_RW_LEN 65536
#define TW_MR_RO_LEN 8192


#endif
