/* shm_ring.h - what the shm ring fuzz target (shm_ring_fuzz.c) shares with
 * its input builders (shm_ring_gen.c): the input's records and markers. */
#ifndef LOOM_TEST_SHM_RING_H
#define LOOM_TEST_SHM_RING_H

#include <stddef.h>
#include <stdint.h>

/* The driver's interface (fz_generate: records of every kind with fields
 * near their limits; fz_final_check: the exchanges with the legitimate
 * peer that every 128th input runs; fz_report: inputs, cells, answers). */
#include "target.h"

/* An input is a list of records, each a kind byte (its value % 8) and the
 * kind's fields, little-endian; a record cut short by the input's end is
 * dropped.
 *   PKT   sel:1 hdr:64 plen:2 [mask:1] [wlen:4] [clen:4] [buf:4] bytes
 *         an engine packet as a peer's link writes it (sel: SR_SEL_*),
 *         min(plen, SR_PKT_BYTES) payload bytes from the input, the rest a
 *         pattern; the optional fields as sel asks, in that order
 *   RAW   clen:4 n:1 bytes:n       one cell, its data and length as given
 *   POLL  n:1                      the endpoint progressed n % 4 + 1 times
 *   CTRL  which:1 value:8          a word of a region's header (SR_CTRL_*)
 *   TX    kind:1                   the endpoint starts a request to the peer
 *   BUF   idx:1 off:2 n:1 bytes:n  written into one of its bounce buffers
 */
enum { SR_PKT, SR_PKT2, SR_RAW, SR_POLL, SR_CTRL, SR_TX, SR_BUF, SR_PKT3, SR_KINDS };

#define SR_SEL_WHO      0x03 /* 0: peer H; 1: H2; 2: A itself; 3: a region nobody has */
#define SR_SEL_CARRIER  0x0c /* 0: as the link would; 4: a bounce buffer; */
#define SR_SEL_BUF      0x04 /* 8: buffer index from the input; 12: inline, */
#define SR_SEL_RAWBUF   0x08 /* the payload cut to what the cell holds */
#define SR_SEL_CUT      0x0c
#define SR_SEL_MASK     0x10 /* the header-word mask from the input */
#define SR_SEL_WLEN     0x20 /* the wire's length from the input */
#define SR_SEL_CLEN     0x40 /* the cell's length from the input */
#define SR_SEL_RAWHDR   0x80 /* version, op and len not made valid */
#define SR_PKT_BYTES    256
#define SR_MAX_PAYLOAD  65536

/* CTRL: which % 16.  The endpoint's region: */
#define SR_CTRL_ROOM_WANTED 0
#define SR_CTRL_WAITER      1  /* waiters[v % 16]: state v>>8, pid v>>16, token v */
#define SR_CTRL_BUF_FREE    2
#define SR_CTRL_META_NEXT   3  /* meta[v % count].next = v >> 32 */
#define SR_CTRL_META_STATE  4  /* meta[v % count].state = v >> 32 */
#define SR_CTRL_SLEEPING    5
#define SR_CTRL_RING_FREED  6
#define SR_CTRL_CELL_SEQ    7  /* the seq of the cell at ring_head + (int8)v = v >> 8 */
#define SR_CTRL_RING_HEAD   8
/* Peer H's region, which the endpoint writes into: */
#define SR_CTRL_H_HEAD      9
#define SR_CTRL_H_FREED     10
#define SR_CTRL_H_BUF_FREE  11
#define SR_CTRL_H_META      12 /* meta[v % count]: next v >> 32, state v >> 8 & 1 */
#define SR_CTRL_H_SLEEPING  13
#define SR_CTRL_H_ROOM      14
#define SR_CTRL_H_ALIVE     15 /* 0 here: the endpoint takes H for dead */

/* TX: kind % 6, what the endpoint starts toward H (one of each at a time). */
enum { SR_TX_SEND_ACK, SR_TX_SEND_RNDV, SR_TX_READ, SR_TX_ATOMIC, SR_TX_WRITE_RNDV,
       SR_TX_WRITE, SR_TX_KINDS };

/* Markers: an 8-byte little-endian value in a header or payload whose
 * upper half is one of these takes a live value before it is written. */
#define SR_MARK_ADDR_RW 0x4c4d4131u /* "LMA1": the endpoint's read-write region + off */
#define SR_MARK_ADDR_RO 0x4c4d4132u /* "LMA2": its read-only region + off */
#define SR_MARK_KEY_RW  0x4c4d4b31u /* "LMK1": the region's key ^ low */
#define SR_MARK_KEY_RO  0x4c4d4b32u /* "LMK2" */
#define SR_MARK_ARENA   0x4c4d4341u /* "LMCA": H's own memory (CMA) + off */
#define SR_MARK_HANDLE  0x4c4d484bu /* "LMHK": the low-th request handle the endpoint sent */
#define SR_MARK_PID     0x4c4d5044u /* "LMPD": H's pid | low << 32 (a cell's first word) */
#define SR_MARK_TOKEN   0x4c4d544bu /* "LMTK": the token of H (low even) or H2 */

#define SR_MR_RW_LEN 65536
#define SR_MR_RO_LEN 8192
#define SR_ARENA_LEN (256 * 1024)
/* The tag a receive of 70,000 bytes alone takes (others: top bits clear). */
#define SR_BIG_TAG (1ULL << 62)

#endif
