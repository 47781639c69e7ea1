/* provs.h - the providers loom builds, each described once by what the
 * tests need to know of it.  A test that differs by provider asks the
 * description, never the name, so a new provider is one entry here (and
 * one row of the tests/ep matrix in tests/meson.build). */
#ifndef LOOM_TEST_PROVS_H
#define LOOM_TEST_PROVS_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <rdma/fabric.h>

struct test_prov {
	const char *name;
	/* The endpoint types it offers, ended by FI_EP_UNSPEC (0). */
	enum fi_ep_type types[4];
	/* A peer's sends wait on this side's progress (manual progress):
	 * tcp's to accept its connection, udp's to acknowledge its packets.
	 * A process that only waits for a peer must progress meanwhile. */
	bool answers;
	/* Its endpoints own /dev/shm regions, cleaned up when their process
	 * dies. */
	bool regions;
	/* FI_SHM_DISABLE_CMA chooses between its single-copy path and its
	 * bounce buffers (tests run both). */
	bool cma_switch;
	/* The parameter that sends to same-host peers through shared memory
	 * beside its own link (default on), or NULL. */
	const char *shm_param;
	/* The message sizes on and one byte either side of every protocol
	 * boundary of its link (see src/prov/<name>), ascending, then 1 MiB
	 * and 16 MiB. */
	const size_t *edges;
	size_t nedges;
};

/* shm: the inline cell payload (192 B), inject and bounce size (4 KiB),
 * its packet (64 KiB); tcp: inline (256 B), inject (4 KiB), eager
 * (64 KiB) and packet (192 KiB) sizes; both: the engine's largest RTS
 * with its first piece (512 KiB). */
static const size_t test_shm_edges[] = {1,      191,    192,    193,      4095,
                                        4096,   4097,   65535,  65536,    65537,
                                        524287, 524288, 524289, 1u << 20, 16u << 20};
static const size_t test_tcp_edges[] = {
    1,      255,    256,    257,    4095,   4096,   4097,     65535,     65536,
    65537,  196607, 196608, 196609, 524287, 524288, 524289, 1u << 20, 16u << 20};

/* udp on loopback (MTU 65536): inject (4 KiB), the packet (65536 less
 * 48 B of IP and UDP, 64 B of its header, 64 B of the engine's). */
static const size_t test_udp_edges[] = {1,      4095,   4096,   4097,     65359,    65360,
                                        65361,  524287, 524288, 524289,   1u << 20, 16u << 20};

#define TEST_EDGES(a) .edges = (a), .nedges = sizeof(a) / sizeof((a)[0])

static const struct test_prov test_provs[] = {
	{.name = "shm",
	 .types = {FI_EP_RDM},
	 .regions = true,
	 .cma_switch = true,
	 TEST_EDGES(test_shm_edges)},
	{.name = "tcp",
	 .types = {FI_EP_RDM, FI_EP_MSG},
	 .answers = true,
	 .shm_param = "FI_TCP_ENABLE_SHM",
	 TEST_EDGES(test_tcp_edges)},
	{.name = "udp",
	 .types = {FI_EP_RDM},
	 .answers = true,
	 .shm_param = "FI_UDP_ENABLE_SHM",
	 TEST_EDGES(test_udp_edges)},
};

#define TEST_NPROVS (sizeof(test_provs) / sizeof(test_provs[0]))

/* The description of provider name, or NULL. */
static inline const struct test_prov *test_prov_find(const char *name)
{
	for (size_t i = 0; i < TEST_NPROVS; i++)
		if (!strcmp(test_provs[i].name, name))
			return &test_provs[i];
	return NULL;
}

#endif
