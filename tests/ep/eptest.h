/* eptest.h - what the multi-process endpoint tests share: forking a group
 * of processes under a coordinator (timeouts, reaping, all-gathers), and
 * opening an RDM endpoint of the provider under test through the public
 * API with its peers in an AV. */
#ifndef LOOM_TEST_EPTEST_H
#define LOOM_TEST_EPTEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "provs.h"

#define ET_MAX_PROCS 16
#define ET_SLOT      64 /* bytes each process contributes to an all-gather */

/* How one endpoint is opened; zero fields take the defaults noted. */
struct et_opts {
	uint64_t caps;         /* 0: FI_MSG | FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV */
	uint32_t version;      /* API version asked for (0: FI_VERSION(1, 17)) */
	uint64_t tx_op_flags;  /* tx_attr->op_flags hint */
	enum fi_wait_obj wait; /* CQ wait object (0: FI_WAIT_NONE) */
	bool selective;        /* bind the CQs with FI_SELECTIVE_COMPLETION */
	bool split_cq;         /* separate transmit and receive CQs */
	bool cntrs;            /* send and receive counters */
	bool remote_cntrs;     /* remote read and remote write counters */
	size_t unexp_max;      /* rx_attr->total_buffered_recv hint (0: none) */
	bool no_cma;           /* FI_SHM_DISABLE_CMA=1 for this process */
	size_t tx_size, rx_size; /* queue depth hints (0: provider's) */
	size_t cq_size;          /* 0: 4096 */
	/* 0: FI_CQ_FORMAT_TAGGED; ET_CQ_UNSPEC: FI_CQ_FORMAT_UNSPEC; else that */
	int cq_format;
	/* domain_attr->threading hint (0: none, the provider's) */
	enum fi_threading threading;
	/* fi_setname with this FI_ADDR_STR address before enabling (NULL:
	 * keep the provider's) */
	const char *setname;
};

/* et_opts.cq_format asking for FI_CQ_FORMAT_UNSPEC, whose value is the 0
 * that already means "the tagged default". */
#define ET_CQ_UNSPEC (-1)

struct et_ep {
	int rank, nprocs;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_ep *ep;
	struct fid_cq *txcq, *rxcq; /* the same CQ unless split_cq */
	struct fid_cntr *scntr, *rcntr;
	struct fid_cntr *rrcntr, *rwcntr; /* remote read / write (remote_cntrs) */
	char name[ET_SLOT];               /* own FI_ADDR_STR address */
	fi_addr_t addr[ET_MAX_PROCS];     /* peers by rank (FI_ADDR_NOTAVAIL: gone) */
	pid_t pid[ET_MAX_PROCS];          /* their process ids */
	char peer_name[ET_MAX_PROCS][ET_SLOT];
};

/* Body of one process of a group: returns its exit status (0 = passed). */
typedef int (*et_fn)(int rank, int nprocs, void *arg);

/* Fork nprocs processes running fn(rank), coordinate their all-gathers,
 * kill them all when timeout_s passes, reap every one and report.  Ranks
 * in may_die (bit per rank) may end by SIGKILL.  Returns 0 when every
 * process passed. */
int et_run(const char *what, int nprocs, int timeout_s, et_fn fn, void *arg,
           unsigned may_die);

/* In a process: contribute len (<= ET_SLOT) bytes and receive every
 * process's slot (nprocs * ET_SLOT bytes; zeros for processes gone).
 * Doubles as a barrier. */
int et_allgather(const void *mine, size_t len, void *all);
int et_barrier(void);
/* A barrier that progresses e while it waits, as an application's own
 * barrier over the fabric would: a peer still finishing may need our
 * answers (udp acknowledges a peer's packets in our progress). */
struct et_ep;
int et_barrier_progress(struct et_ep *e);

/* The provider under test: $LOOM_TEST_PROV, default "shm" (tests/meson.build
 * runs each program of tests/ep once per provider row; tcp with
 * FI_TCP_IFACE=lo).  et_open passes $LOOM_TEST_NODE, if set, to fi_getinfo
 * as the source address (::1: the tcp6 row, tcp over IPv6), and fails
 * unless the endpoint's name starts with $LOOM_TEST_NAME_PREFIX, if set. */
const char *et_prov(void);
/* Its description (tests/lib/provs.h): what a test that differs by
 * provider asks.  Never NULL: an unknown provider fails the process. */
const struct test_prov *et_desc(void);
/* The link two processes of this host talk through: "shm" where the
 * provider is shm or sends to same-host peers through shared memory (its
 * shm_param, on by default); else the provider's own. */
const char *et_link(void);

/* Open everything, exchange names with the group (collective) and insert
 * them all, so e->addr[r] is rank r.  Prints what failed; returns 0 or a
 * negative FI_E* code. */
int et_open(struct et_ep *e, const struct et_opts *o);
/* Same without the exchange: a lone endpoint. */
int et_open_local(struct et_ep *e, const struct et_opts *o);
/* Close whatever is open (NULL members skipped); returns the first error. */
int et_close(struct et_ep *e);

/* Read one entry (tagged format) from cq, driving progress, for at most
 * timeout_ms: 1, -FI_EAVAIL with *err filled (err_data copied into
 * errbuf of ET_ERRBUF bytes when given), or -FI_ETIMEDOUT. */
#define ET_ERRBUF 256
ssize_t et_read(struct fid_cq *cq, struct fi_cq_tagged_entry *e, fi_addr_t *src,
                struct fi_cq_err_entry *err, char *errbuf, int timeout_ms);
/* Drive progress (reads nothing): a counter read, or a zero-count CQ read. */
void et_progress(struct et_ep *e);

/* Deterministic content: byte i of message `seed`, and its check. */
void et_fill(void *buf, size_t len, uint64_t seed);
/* Returns the first differing offset, or (size_t)-1 when all match. */
size_t et_verify(const void *buf, size_t len, uint64_t seed);

uint64_t et_now_us(void);

/* ---- for tests whose peer ends (exits or is killed) ---------------------- */

/* Has process pid ended (exited, or a zombie not yet reaped)? */
bool et_gone(pid_t pid);
/* How many regions process pid has in /dev/shm (loom names them
 * loom-<uid>-<pid>-*); -1 when the directory cannot be read. */
int et_regions_of(pid_t pid);
/* The message sizes on and one byte either side of every protocol
 * boundary of the provider under test, ascending, then 1 MiB and 16 MiB:
 * sets *sizes, returns how many. */
size_t et_edge_sizes(const size_t **sizes);
/* Messages more than were sent: post a fresh untagged and a wildcard
 * tagged receive, wait ms for them, cancel them; returns how many were
 * matched (0: nothing more came). */
int et_stray(struct et_ep *e, int ms);

#endif
