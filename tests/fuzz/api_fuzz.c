/* api_fuzz.c - fuzz target over loom's public API: each input is a
 * program of libfabric calls, run in one process on shm or tcp (the
 * first byte says which).  Every input starts from a world of two RDM
 * endpoints, A and B, that can talk (one fabric, domain, AV, two CQs, a
 * counter, a registered region), then its calls:
 *
 *   open and close AVs, CQs, counters, EQs, regions, endpoints, shared
 *   and scalable contexts in any order; bind, enable, fi_control;
 *   insert addresses of every kind (random bytes and lengths, packed
 *   strings, host and service, symmetric ranges), remove, look up,
 *   print them; send, receive, tagged, RMA and atomic calls of every
 *   form with random flags, lengths, iov counts, keys, offsets and
 *   fi_addr_t values; read CQs, their errors, counters and EQs; cancel,
 *   fi_setopt/fi_getopt, getname/setname.
 *
 * What must hold: every call returns 0 or more, or a negative fi_errno;
 * nothing crashes, hangs or writes outside the buffers given (each
 * buffer is its own allocation, so AddressSanitizer sees overflows);
 * everything opened closes at the end of the input, and LeakSanitizer
 * finds nothing left.  The buffers and lengths the program passes are
 * always its own and true (the API cannot check a pointer); whatever
 * else it passes may be anything.
 *
 * Network hygiene: on tcp every IP address the program makes up is
 * moved into 127.0.0.0/8 (or ::1) before loom sees it, and host names
 * come from a fixed list, so no packet leaves the machine and no name is
 * looked up in DNS. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "reader.h"
#include "target.h"

#define NBUF     8
#define BUF_SIZE (64 * 1024)
#define NCTX     64
#define NSLOT    6
#define MAX_IOV  6
#define SCRATCH  4096

enum kind { K_AV, K_CQ, K_CNTR, K_EQ, K_MR, K_EP, K_DOM, K_FAB, K_NKINDS };
static const char *const kind_name[K_NKINDS] = {"av", "cq", "cntr",   "eq",
                                                "mr", "ep", "domain", "fabric"};

/* What an endpoint slot holds: what decides how it may be used and in
 * which order it must close. */
enum ep_sort { E_EP, E_SEP, E_TXC, E_RXC, E_SRX, E_STX };

struct world {
	bool tcp;
	struct fi_info *info;
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_av *av;
	struct fid_cq *cq[2];
	struct fid_cntr *cntr;
	struct fid_mr *mr;
	struct fid_ep *ep[2];
	fi_addr_t fa[2];
	char name[2][256];
	size_t namelen[2];
	uint64_t mr_key;
	/* The program's own objects. */
	struct fid *slot[K_NKINDS][NSLOT];
	enum ep_sort sort[NSLOT];
};

static struct fi_info *infos[2]; /* per provider, asked once */
static uint8_t *bufs[NBUF];      /* each its own allocation */
static struct fi_context2 ctxs[NCTX];
static unsigned long runs, calls, errors, world_fail;

static void fence_sockaddr(uint8_t *b, size_t len);
static int trace = -1; /* FZ_TRACE set: each step on stderr */

/* ---- the world ------------------------------------------------------------- */

static struct fi_info *ask(bool tcp)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;

	FZ_CHECK(hints, "fi_allocinfo");
	hints->fabric_attr->prov_name = strdup(tcp ? "tcp" : "shm");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_MULTI_RECV |
	              FI_SOURCE | FI_DIRECTED_RECV | FI_RMA_EVENT | FI_NAMED_RX_CTX;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	FZ_CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info) == 0 && info,
	         "fi_getinfo(%s)", tcp ? "tcp" : "shm");
	fi_freeinfo(hints);
	return info;
}

static bool open_ep(struct world *w, int i)
{
	if (fi_endpoint(w->dom, w->info, &w->ep[i], NULL))
		return false;
	if (fi_ep_bind(w->ep[i], &w->av->fid, 0) ||
	    fi_ep_bind(w->ep[i], &w->cq[i]->fid, FI_TRANSMIT | FI_RECV) ||
	    (i == 0 && fi_ep_bind(w->ep[i], &w->cntr->fid,
	                          FI_SEND | FI_RECV | FI_READ | FI_WRITE |
	                              FI_REMOTE_READ | FI_REMOTE_WRITE)) ||
	    fi_enable(w->ep[i]))
		return false;
	w->namelen[i] = sizeof(w->name[i]);
	return fi_getname(&w->ep[i]->fid, w->name[i], &w->namelen[i]) == 0;
}

static bool world_open(struct world *w, bool tcp)
{
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .size = 256};
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fi_av_attr ava = {.type = FI_AV_TABLE};

	memset(w, 0, sizeof(*w));
	w->tcp = tcp;
	w->info = infos[tcp];
	if (fi_fabric(w->info->fabric_attr, &w->fab, NULL) ||
	    fi_domain(w->fab, w->info, &w->dom, NULL) ||
	    fi_av_open(w->dom, &ava, &w->av, NULL) ||
	    fi_cq_open(w->dom, &cqa, &w->cq[0], NULL) ||
	    fi_cq_open(w->dom, &cqa, &w->cq[1], NULL) ||
	    fi_cntr_open(w->dom, &ca, &w->cntr, NULL) ||
	    fi_mr_reg(w->dom, bufs[0], BUF_SIZE, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0,
	              0, &w->mr, NULL))
		return false;
	w->mr_key = fi_mr_key(w->mr);
	if (!open_ep(w, 0) || !open_ep(w, 1))
		return false;
	for (int i = 0; i < 2; i++)
		if (fi_av_insert(w->av, w->name[i], 1, &w->fa[i], 0, NULL) != 1)
			return false;
	return true;
}

/* Every CQ and counter of the world, read: what progresses its
 * endpoints. */
static void drain_all(struct world *w)
{
	struct fi_cq_tagged_entry e[8];

	for (int i = 0; i < 2; i++)
		(void)fi_cq_read(w->cq[i], e, 8);
	(void)fi_cntr_read(w->cntr);
	for (int s = 0; s < NSLOT; s++) {
		if (w->slot[K_CQ][s])
			(void)fi_cq_read((struct fid_cq *)w->slot[K_CQ][s], e, 8);
		if (w->slot[K_CNTR][s])
			(void)fi_cntr_read((struct fid_cntr *)w->slot[K_CNTR][s]);
	}
}

/* A transmit context refuses to close while an operation of its is in
 * flight (-FI_EBUSY; its completion would have nowhere to go): progress
 * ends those, within a bound, as an application would drain them. */
static void close_slots(struct world *w, enum kind k, int sorts)
{
	for (int s = 0; s < NSLOT; s++) {
		int ret;

		if (!w->slot[k][s] || (k == K_EP && !(sorts & 1 << w->sort[s])))
			continue;
		ret = fi_close(w->slot[k][s]);
		for (int tries = 0; ret == -FI_EBUSY && k == K_EP && w->sort[s] == E_TXC &&
		                    tries < 200000;
		     tries++) {
			drain_all(w);
			ret = fi_close(w->slot[k][s]);
		}
		FZ_CHECK(ret == 0, "closing %s slot %d: %d", kind_name[k], s, ret);
		w->slot[k][s] = NULL;
	}
}

static void close_one(struct fid *f, const char *what)
{
	if (f)
		FZ_CHECK(fi_close(f) == 0, "closing %s", what);
}

/* Close everything, each after what may be bound to it: contexts, then
 * endpoints, then shared contexts, regions, and the queues, counters and
 * AVs they reported to, then domain and fabric. */
static void world_close(struct world *w)
{
	close_slots(w, K_EP, 1 << E_TXC | 1 << E_RXC);
	close_slots(w, K_EP, 1 << E_EP | 1 << E_SEP);
	for (int i = 0; i < 2; i++)
		close_one(w->ep[i] ? &w->ep[i]->fid : NULL, "an endpoint");
	close_slots(w, K_EP, 1 << E_SRX | 1 << E_STX);
	close_slots(w, K_MR, 0);
	close_one(w->mr ? &w->mr->fid : NULL, "the region");
	close_slots(w, K_AV, 0);
	close_slots(w, K_CQ, 0);
	close_slots(w, K_CNTR, 0);
	close_slots(w, K_EQ, 0);
	close_slots(w, K_DOM, 0);
	close_slots(w, K_FAB, 0);
	close_one(w->av ? &w->av->fid : NULL, "the AV");
	for (int i = 0; i < 2; i++)
		close_one(w->cq[i] ? &w->cq[i]->fid : NULL, "a CQ");
	close_one(w->cntr ? &w->cntr->fid : NULL, "the counter");
	close_one(w->dom ? &w->dom->fid : NULL, "the domain");
	close_one(w->fab ? &w->fab->fid : NULL, "the fabric");
}

/* ---- choosing arguments ------------------------------------------------------ */

/* An endpoint-like fid: A, B, or one of the program's (of any sort:
 * calls a sort does not support must be refused).  A shared transmit
 * context is a struct fid_stx, with no data or cm operations to call:
 * only calls that go through its fid (bind, control, close, cancel,
 * options) take one. */
static struct fid_ep *pick_any_ep(struct fz_reader *r, struct world *w, bool stx_too)
{
	unsigned k = fz_below(r, 2 + NSLOT);

	if (k < 2 || !w->slot[K_EP][k - 2] || (w->sort[k - 2] == E_STX && !stx_too))
		return w->ep[k % 2];
	return (struct fid_ep *)w->slot[K_EP][k - 2];
}

static struct fid_ep *pick_ep(struct fz_reader *r, struct world *w)
{
	return pick_any_ep(r, w, false);
}

/* Any open object of kind k, or the world's own. */
static struct fid *pick_obj(struct fz_reader *r, struct world *w, enum kind k)
{
	unsigned s = fz_below(r, NSLOT + 2);

	if (s < NSLOT && w->slot[k][s])
		return w->slot[k][s];
	switch (k) {
	case K_AV:
		return &w->av->fid;
	case K_CQ:
		return &w->cq[s % 2]->fid;
	case K_CNTR:
		return &w->cntr->fid;
	case K_MR:
		return &w->mr->fid;
	case K_EP:
		return &w->ep[s % 2]->fid;
	case K_DOM:
		return &w->dom->fid;
	case K_FAB:
		return &w->fab->fid;
	default:
		return NULL;
	}
}

static int free_slot(struct world *w, enum kind k)
{
	for (int s = 0; s < NSLOT; s++)
		if (!w->slot[k][s])
			return s;
	return -1;
}

/* The world's domain (mostly) or one the program opened; same for
 * fabrics.  What opens on another domain cannot bind to A or B. */
static struct fid_domain *pick_dom(struct fz_reader *r, struct world *w)
{
	unsigned s = fz_below(r, 4 * NSLOT);

	return s < NSLOT && w->slot[K_DOM][s] ? (struct fid_domain *)w->slot[K_DOM][s]
	                                      : w->dom;
}

static struct fid_fabric *pick_fab(struct fz_reader *r, struct world *w)
{
	unsigned s = fz_below(r, 4 * NSLOT);

	return s < NSLOT && w->slot[K_FAB][s] ? (struct fid_fabric *)w->slot[K_FAB][s]
	                                      : w->fab;
}

static fi_addr_t pick_addr(struct fz_reader *r, struct world *w)
{
	switch (fz_below(r, 8)) {
	case 0:
	case 1:
	case 2:
		return w->fa[fz_below(r, 2)];
	case 3:
		return FI_ADDR_UNSPEC;
	case 4:
		return fz_below(r, 16);
	case 5:
		return fi_rx_addr(w->fa[fz_below(r, 2)], fz_below(r, 8),
		                  1 + fz_below(r, 8));
	case 6:
		return FI_ADDR_NOTAVAIL;
	default:
		return fz_u64(r);
	}
}

/* A buffer of ours and a length that fits in it. */
static void *pick_buf(struct fz_reader *r, size_t *len)
{
	uint8_t *b = bufs[fz_below(r, NBUF)];
	size_t off = fz_u16(r) % BUF_SIZE;
	size_t n = (size_t)(fz_size(r) % (BUF_SIZE - off + 1));

	*len = n;
	return b + off;
}

/* count iov entries over our buffers (count may be above any limit). */
static size_t pick_iov(struct fz_reader *r, struct iovec *iov, void **desc,
                       struct world *w)
{
	size_t count = fz_below(r, MAX_IOV + 1);

	for (size_t i = 0; i < count; i++) {
		iov[i].iov_base = pick_buf(r, &iov[i].iov_len);
		desc[i] = fz_below(r, 2) ? fi_mr_desc(w->mr) : NULL;
	}
	return count;
}

static void *pick_ctx(struct fz_reader *r)
{
	struct fi_context2 *c = &ctxs[fz_below(r, NCTX)];

	return c;
}

static uint64_t pick_flags(struct fz_reader *r)
{
	return fz_flags(r, FI_COMPLETION | FI_INJECT | FI_REMOTE_CQ_DATA | FI_MORE |
	                       FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |
	                       FI_DELIVERY_COMPLETE | FI_FENCE | FI_MULTI_RECV | FI_PEEK |
	                       FI_CLAIM | FI_DISCARD | FI_MATCH_COMPLETE |
	                       FI_SELECTIVE_COMPLETION);
}

/* Bytes from the input into a zeroed scratch buffer of SCRATCH bytes (so
 * a string the program makes is always terminated inside it). */
static size_t fill_scratch(struct fz_reader *r, uint8_t *s, size_t max)
{
	size_t n = fz_u16(r) % (max + 1);

	memset(s, 0, SCRATCH);
	for (size_t i = 0; i < n; i++)
		s[i] = fz_u8(r);
	return n;
}

/* On tcp, an address the program made up stays on this machine. */
static void fence_sockaddr(uint8_t *b, size_t len)
{
	uint16_t fam;

	if (len < sizeof(fam))
		return;
	memcpy(&fam, b, sizeof(fam));
	if (fam == AF_INET && len >= sizeof(struct sockaddr_in)) {
		b[offsetof(struct sockaddr_in, sin_addr)] = 127;
	} else if (fam == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		struct in6_addr lo = IN6ADDR_LOOPBACK_INIT;

		memcpy(b + offsetof(struct sockaddr_in6, sin6_addr), &lo, sizeof(lo));
	}
}

/* Every binary address a scratch buffer could hold, fenced. */
static void fence_all(struct world *w, uint8_t *scratch)
{
	size_t len = w->info->src_addrlen;

	if (!w->tcp || w->info->addr_format == FI_ADDR_STR || !len)
		return;
	for (size_t i = 0; i + len <= SCRATCH; i += len)
		fence_sockaddr(scratch + i, len);
}

/* Packed FI_ADDR_STR text, fenced on tcp: any "fi_sockaddr_in" address
 * text is made a loopback one. */
static const char *const tcp_texts[] = {"fi_sockaddr_in://127.0.0.1:9",
                                        "fi_sockaddr_in://127.0.0.1:0",
                                        "fi_sockaddr_in6://[::1]:9",
                                        "fi_sockaddr_in://127.0.0.1:65536",
                                        "fi_sockaddr_in://127.0.0.1",
                                        "fi_sockaddr_in://:9",
                                        "fi_sockaddr_in://127.0.0.1:-1",
                                        "fi_sockaddr_in6://[::1",
                                        "fi_sockaddr_in://",
                                        "fi_shm://1/2",
                                        "127.0.0.1:9",
                                        "fi_sockaddr_in://127.0.0.1:9x"};
/* Hosts for fi_av_insertsvc/insertsym: on tcp only these (answered by
 * the machine itself, no DNS query), on shm any text. */
static const char *const hosts[] = {"127.0.0.1", "::1",     "localhost",
                                    "127.0.0.2", "0.0.0.0", "127.1"};
static const char *const services[] = {"0", "9", "65535", "65536", "-1", "", "x", "07"};

/* ---- the calls ------------------------------------------------------------- */

static long long note(long long ret)
{
	if (trace)
		fprintf(stderr, "  -> %lld\n", ret);
	calls++;
	FZ_CHECK(fz_code_ok(ret), "a call returned %lld: not an fi_errno", ret);
	if (ret < 0)
		errors++;
	return ret;
}

static void op_open(struct fz_reader *r, struct world *w)
{
	enum kind k = (enum kind)fz_below(r, K_NKINDS);
	int s = free_slot(w, k);
	uint8_t wait = fz_below(r, 4) ? FI_WAIT_NONE : fz_below(r, 8);
	size_t size = fz_size(r);
	int ret = -FI_EINVAL;

	if (s < 0)
		return;
	/* Sizes the program could use, or far past any limit. */
	if (size > (1u << 16) && size < SIZE_MAX / 4)
		size %= 1u << 16;
	switch (k) {
	case K_AV: {
		struct fi_av_attr a = {
		    .type = (enum fi_av_type)fz_below(r, 5),
		    .rx_ctx_bits = fz_below(r, 70),
		    .count = size,
		    .ep_per_node = fz_below(r, 4),
		    .flags = fz_flags(r, FI_EVENT | FI_READ | FI_SYMMETRIC)};
		ret = (int)note(fi_av_open(
		    pick_dom(r, w), &a, (struct fid_av **)&w->slot[k][s], pick_ctx(r)));
		break;
	}
	case K_CQ: {
		struct fi_cq_attr a = {.size = size,
		                       .flags = fz_flags(r, FI_AFFINITY),
		                       .format = (enum fi_cq_format)fz_below(r, 7),
		                       .wait_obj = (enum fi_wait_obj)wait,
		                       .signaling_vector = (int)fz_u8(r),
		                       .wait_cond = (enum fi_cq_wait_cond)fz_below(r, 3)};
		ret = (int)note(fi_cq_open(
		    pick_dom(r, w), &a, (struct fid_cq **)&w->slot[k][s], pick_ctx(r)));
		break;
	}
	case K_CNTR: {
		struct fi_cntr_attr a = {.events = (enum fi_cntr_events)fz_below(r, 3),
		                         .wait_obj = (enum fi_wait_obj)wait,
		                         .flags = fz_flags(r, 0)};
		ret = (int)note(fi_cntr_open(
		    pick_dom(r, w), &a, (struct fid_cntr **)&w->slot[k][s], pick_ctx(r)));
		break;
	}
	case K_EQ: {
		struct fi_eq_attr a = {.size = size,
		                       .flags = fz_flags(r, FI_WRITE),
		                       .wait_obj = (enum fi_wait_obj)wait,
		                       .signaling_vector = (int)fz_u8(r)};
		ret = (int)note(fi_eq_open(
		    pick_fab(r, w), &a, (struct fid_eq **)&w->slot[k][s], pick_ctx(r)));
		break;
	}
	case K_MR: {
		struct iovec iov[MAX_IOV];
		void *desc[MAX_IOV];
		size_t n = pick_iov(r, iov, desc, w);
		uint64_t access = fz_flags(r, FI_SEND | FI_RECV | FI_READ | FI_WRITE |
		                                  FI_REMOTE_READ | FI_REMOTE_WRITE);
		uint64_t off = fz_below(r, 2) ? 0 : fz_u64(r), key = fz_u64(r);
		uint64_t flags = fz_flags(r, FI_RMA_EVENT);

		if (fz_below(r, 2) && n)
			ret = (int)note(fi_mr_reg(
			    pick_dom(r, w), iov[0].iov_base, iov[0].iov_len, access, off,
			    key, flags, (struct fid_mr **)&w->slot[k][s], pick_ctx(r)));
		else
			ret = (int)note(
			    fi_mr_regv(pick_dom(r, w), iov, n, access, off, key, flags,
			               (struct fid_mr **)&w->slot[k][s], pick_ctx(r)));
		break;
	}
	case K_EP: {
		struct fi_info *info = fi_dupinfo(w->info);
		unsigned sort = fz_below(r, 4);

		FZ_CHECK(info, "fi_dupinfo");
		info->ep_attr->tx_ctx_cnt = fz_below(r, 3) ? fz_below(r, 5) : fz_size(r);
		info->ep_attr->rx_ctx_cnt = fz_below(r, 3) ? fz_below(r, 5) : fz_size(r);
		if (fz_below(r, 4) == 0)
			info->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT;
		if (fz_below(r, 4) == 0)
			info->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
		info->tx_attr->size = fz_below(r, 2) ? info->tx_attr->size : size;
		info->rx_attr->size = fz_below(r, 2) ? info->rx_attr->size : size;
		info->tx_attr->op_flags =
		    fz_flags(r, FI_COMPLETION | FI_DELIVERY_COMPLETE);
		info->rx_attr->op_flags = fz_flags(r, FI_COMPLETION | FI_MULTI_RECV);
		if (sort == 0) {
			w->sort[s] = E_EP;
			ret = (int)note(fi_endpoint(pick_dom(r, w), info,
			                            (struct fid_ep **)&w->slot[k][s],
			                            pick_ctx(r)));
		} else if (sort == 1) {
			w->sort[s] = E_SEP;
			ret = (int)note(fi_scalable_ep(pick_dom(r, w), info,
			                               (struct fid_ep **)&w->slot[k][s],
			                               pick_ctx(r)));
		} else if (sort == 2) {
			w->sort[s] = E_SRX;
			ret = (int)note(fi_srx_context(
			    pick_dom(r, w), fz_below(r, 2) ? info->rx_attr : NULL,
			    (struct fid_ep **)&w->slot[k][s], pick_ctx(r)));
		} else {
			w->sort[s] = E_STX;
			ret = (int)note(fi_stx_context(
			    pick_dom(r, w), fz_below(r, 2) ? info->tx_attr : NULL,
			    (struct fid_stx **)&w->slot[k][s], pick_ctx(r)));
		}
		fi_freeinfo(info);
		break;
	}
	case K_DOM: {
		struct fi_info *info = fi_dupinfo(w->info);

		FZ_CHECK(info, "fi_dupinfo");
		/* A second domain of the same fabric or another, or one
		 * asked with a name or threading model it does not have. */
		if (fz_below(r, 4) == 0) {
			free(info->domain_attr->name);
			info->domain_attr->name = strdup(fz_below(r, 2) ? "no-such" : "");
		}
		if (fz_below(r, 4) == 0)
			info->domain_attr->threading = (enum fi_threading)fz_below(r, 9);
		ret = (int)note(fi_domain(pick_fab(r, w), info,
		                          (struct fid_domain **)&w->slot[k][s],
		                          pick_ctx(r)));
		fi_freeinfo(info);
		break;
	}
	case K_FAB: {
		struct fi_fabric_attr a = *w->info->fabric_attr;

		if (fz_below(r, 4) == 0)
			a.name = fz_below(r, 2) ? "no-such" : NULL;
		if (fz_below(r, 4) == 0)
			a.prov_name = fz_below(r, 2) ? "no-such" : NULL;
		ret = (int)note(
		    fi_fabric(&a, (struct fid_fabric **)&w->slot[k][s], pick_ctx(r)));
		break;
	}
	default:
		break;
	}
	if (ret)
		w->slot[k][s] = NULL;
}

/* A transmit or receive context of a scalable endpoint the program has. */
static void op_sep_ctx(struct fz_reader *r, struct world *w)
{
	int from = fz_below(r, NSLOT), s = free_slot(w, K_EP);
	bool rx = fz_below(r, 2);
	int index = fz_below(r, 4) ? (int)fz_below(r, 6) : (int)fz_u32(r);
	struct fid_ep *sep = (struct fid_ep *)w->slot[K_EP][from];
	int ret;

	if (s < 0 || !sep)
		return;
	if (rx)
		ret = (int)note(fi_rx_context(
		    sep, index, NULL, (struct fid_ep **)&w->slot[K_EP][s], pick_ctx(r)));
	else
		ret = (int)note(fi_tx_context(
		    sep, index, NULL, (struct fid_ep **)&w->slot[K_EP][s], pick_ctx(r)));
	if (ret)
		w->slot[K_EP][s] = NULL;
	else
		w->sort[s] = rx ? E_RXC : E_TXC;
}

static void op_bind(struct fz_reader *r, struct world *w)
{
	struct fid_ep *ep = pick_any_ep(r, w, true);
	static const enum kind what[] = {K_AV, K_CQ, K_CNTR, K_EQ, K_MR, K_EP};
	struct fid *obj = pick_obj(r, w, what[fz_below(r, 6)]);
	uint64_t flags =
	    fz_flags(r, FI_TRANSMIT | FI_RECV | FI_SEND | FI_READ | FI_WRITE |
	                    FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SELECTIVE_COMPLETION);

	if (!obj)
		return;
	switch (fz_below(r, 4)) {
	case 0: /* a scalable endpoint binds its AV this way */
		note(fi_scalable_ep_bind(ep, obj, flags));
		break;
	case 1: /* a region to an endpoint or counter (FI_MR_ENDPOINT) */
		note(fi_mr_bind((struct fid_mr *)pick_obj(r, w, K_MR), &ep->fid, flags));
		break;
	default:
		note(fi_ep_bind(ep, obj, flags));
		break;
	}
}

static void op_control(struct fz_reader *r, struct world *w)
{
	static const enum kind any[] = {K_AV, K_CQ, K_CNTR, K_EQ, K_MR, K_EP};
	uint8_t arg[256] = {0};
	struct fid *f;

	switch (fz_below(r, 4)) {
	case 0:
		note(fi_enable(pick_any_ep(r, w, true)));
		return;
	case 1:
		note(fi_mr_enable((struct fid_mr *)pick_obj(r, w, K_MR)));
		return;
	default:
		f = fz_below(r, 8)   ? pick_obj(r, w, any[fz_below(r, 6)])
		    : fz_below(r, 2) ? &w->dom->fid
		                     : &w->fab->fid;
		/* arg: zeroed bytes (any pointer in it is NULL). */
		if (f)
			note(fi_control(
			    f, fz_below(r, 4) ? (int)fz_below(r, 40) : (int)fz_u32(r),
			    fz_below(r, 4) ? arg : NULL));
		return;
	}
}

static void op_close(struct fz_reader *r, struct world *w)
{
	enum kind k = (enum kind)fz_below(r, K_NKINDS);
	int s = fz_below(r, NSLOT);
	int ret;

	if (!w->slot[k][s])
		return;
	/* Closing what something still uses is refused (-FI_EBUSY), and it
	 * stays open. */
	ret = (int)note(fi_close(w->slot[k][s]));
	if (!ret)
		w->slot[k][s] = NULL;
	else
		FZ_CHECK(ret == -FI_EBUSY, "fi_close(%s) = %d", kind_name[k], ret);
}

static void op_av(struct fz_reader *r, struct world *w)
{
	static uint8_t scratch[SCRATCH];
	struct fid_av *av = (struct fid_av *)pick_obj(r, w, K_AV);
	fi_addr_t fa[16];
	int errs[16];
	size_t count = fz_below(r, 17), n;
	uint64_t flags = fz_flags(r, FI_MORE | FI_SYNC_ERR | FI_AV_USER_ID);
	void *ctx = (flags & FI_SYNC_ERR) ? (void *)errs : pick_ctx(r);
	char host[64], svc[16], out[256];
	const char *h, *sv;
	size_t len;

	for (size_t i = 0; i < 16; i++)
		fa[i] = fz_below(r, 2) ? fz_below(r, 4) : FI_ADDR_NOTAVAIL;
	switch (fz_below(r, 8)) {
	case 0: /* random bytes: binary addresses, or packed strings */
		n = fill_scratch(r, scratch, SCRATCH - 1);
		fence_all(w, scratch);
		if (w->tcp && w->info->addr_format == FI_ADDR_STR)
			break; /* text could name any host */
		/* Binary: count entries must lie in the buffer. */
		if (w->info->addr_format != FI_ADDR_STR &&
		    count * w->info->src_addrlen > n)
			count = w->info->src_addrlen ? n / w->info->src_addrlen : 0;
		note(fi_av_insert(av, scratch, count, fa, flags, ctx));
		break;
	case 1: { /* the real addresses, perhaps with a byte changed */
		int i = fz_below(r, 2);

		memset(scratch, 0, SCRATCH);
		memcpy(scratch, w->name[i], w->namelen[i]);
		if (fz_below(r, 2))
			scratch[fz_below(r, (unsigned)w->namelen[i])] ^=
			    (uint8_t)(1 + fz_u8(r));
		if (w->tcp)
			fence_sockaddr(scratch, w->namelen[i]);
		note(fi_av_insert(av, scratch, 1, fa, flags, ctx));
		break;
	}
	case 2: /* text, packed */
		memset(scratch, 0, SCRATCH);
		n = 0;
		for (size_t i = 0; i < count && n < SCRATCH - 300; i++) {
			const char *t =
			    fz_str(r, host, sizeof(host), tcp_texts,
			           w->tcp ? sizeof(tcp_texts) / sizeof(*tcp_texts) : 0);

			if (w->tcp && t == host)
				t = tcp_texts[0];
			memcpy(scratch + n, t, strlen(t) + 1);
			n += strlen(t) + 1;
		}
		fence_all(w, scratch);
		note(fi_av_insert(av, scratch, count, fa, flags, ctx));
		break;
	case 3:
		h = fz_str(r, host, sizeof(host), hosts, sizeof(hosts) / sizeof(*hosts));
		if (w->tcp && h == host)
			h = hosts[0];
		sv = fz_str(r, svc, sizeof(svc), services,
		            sizeof(services) / sizeof(*services));
		note(fi_av_insertsvc(av, h, fz_below(r, 4) ? sv : NULL, fa, flags, ctx));
		break;
	case 4:
		h = fz_str(r, host, sizeof(host), hosts, sizeof(hosts) / sizeof(*hosts));
		if (w->tcp && h == host)
			h = hosts[0];
		sv = fz_str(r, svc, sizeof(svc), services,
		            sizeof(services) / sizeof(*services));
		note(fi_av_insertsym(av, h, fz_below(r, 4), sv, fz_below(r, 4), fa,
		                     flags & ~FI_SYNC_ERR, pick_ctx(r)));
		break;
	case 5:
		note(fi_av_remove(av, fa, count, fz_flags(r, 0)));
		break;
	case 6:
		len = fz_below(r, 2) ? sizeof(out) : fz_below(r, sizeof(out));
		note(fi_av_lookup(av, pick_addr(r, w), out, &len));
		FZ_CHECK(len < (1u << 20), "fi_av_lookup: length %zu", len);
		break;
	default:
		n = fill_scratch(r, scratch, 256);
		if (w->tcp)
			fence_sockaddr(scratch, n);
		len = fz_below(r, sizeof(out));
		(void)fi_av_straddr(av, scratch, out, &len);
		calls++;
		break;
	}
}

static void op_msg(struct fz_reader *r, struct world *w)
{
	struct fid_ep *ep = pick_ep(r, w);
	struct iovec iov[MAX_IOV];
	void *desc[MAX_IOV];
	size_t count = pick_iov(r, iov, desc, w);
	size_t len = count ? iov[0].iov_len : 0;
	void *buf = count ? iov[0].iov_base : bufs[1];
	fi_addr_t addr = pick_addr(r, w);
	uint64_t tag = fz_below(r, 2) ? fz_below(r, 4) : fz_u64(r);
	uint64_t ignore = fz_below(r, 2) ? 0 : fz_u64(r);
	uint64_t data = fz_u64(r), flags = pick_flags(r);
	void *ctx = pick_ctx(r);
	struct fi_msg m = {iov, desc, count, addr, ctx, data};
	struct fi_msg_tagged t = {iov, desc, count, addr, tag, ignore, ctx, data};
	unsigned which = fz_below(r, 20);

	if (trace)
		fprintf(stderr, "  msg call %u ep %p count %zu len %zu addr 0x%llx flags 0x%llx\n",
		        which, (void *)ep, count, len, (unsigned long long)addr,
		        (unsigned long long)flags);
	switch (which) {
	case 0:
		note(fi_send(ep, buf, len, desc[0], addr, ctx));
		break;
	case 1:
		note(fi_sendv(ep, iov, desc, count, addr, ctx));
		break;
	case 2:
		note(fi_sendmsg(ep, &m, flags));
		break;
	case 3:
		note(fi_inject(ep, buf, len, addr));
		break;
	case 4:
		note(fi_senddata(ep, buf, len, desc[0], data, addr, ctx));
		break;
	case 5:
		note(fi_injectdata(ep, buf, len, data, addr));
		break;
	case 6:
		note(fi_tsend(ep, buf, len, desc[0], addr, tag, ctx));
		break;
	case 7:
		note(fi_tsendv(ep, iov, desc, count, addr, tag, ctx));
		break;
	case 8:
		note(fi_tsendmsg(ep, &t, flags));
		break;
	case 9:
		note(fi_tinject(ep, buf, len, addr, tag));
		break;
	case 10:
		note(fi_tsenddata(ep, buf, len, desc[0], data, addr, tag, ctx));
		break;
	case 11:
		note(fi_tinjectdata(ep, buf, len, data, addr, tag));
		break;
	case 12:
		note(fi_recv(ep, buf, len, desc[0], addr, ctx));
		break;
	case 13:
		note(fi_recvv(ep, iov, desc, count, addr, ctx));
		break;
	case 14:
	case 15:
		note(fi_recvmsg(ep, &m, flags));
		break;
	case 16:
		note(fi_trecv(ep, buf, len, desc[0], addr, tag, ignore, ctx));
		break;
	case 17:
		note(fi_trecvv(ep, iov, desc, count, addr, tag, ignore, ctx));
		break;
	default:
		note(fi_trecvmsg(ep, &t, flags));
		break;
	}
}

static void op_rma(struct fz_reader *r, struct world *w)
{
	struct fid_ep *ep = pick_ep(r, w);
	struct iovec iov[MAX_IOV];
	void *desc[MAX_IOV];
	size_t count = pick_iov(r, iov, desc, w);
	size_t len = count ? iov[0].iov_len : 0;
	void *buf = count ? iov[0].iov_base : bufs[1];
	fi_addr_t addr = pick_addr(r, w);
	uint64_t raddr =
	    fz_below(r, 3) ? (uint64_t)(uintptr_t)bufs[0] + fz_u16(r) : fz_u64(r);
	uint64_t key = fz_below(r, 3) ? w->mr_key : fz_u64(r);
	uint64_t data = fz_u64(r), flags = pick_flags(r);
	void *ctx = pick_ctx(r);
	struct fi_rma_iov rio[2] = {{raddr, fz_size(r), key}, {raddr, len, key}};
	struct fi_msg_rma m = {iov, desc, count, addr, rio, fz_below(r, 3), ctx, data};

	switch (fz_below(r, 9)) {
	case 0:
		note(fi_read(ep, buf, len, desc[0], addr, raddr, key, ctx));
		break;
	case 1:
		note(fi_readv(ep, iov, desc, count, addr, raddr, key, ctx));
		break;
	case 2:
		note(fi_readmsg(ep, &m, flags));
		break;
	case 3:
		note(fi_write(ep, buf, len, desc[0], addr, raddr, key, ctx));
		break;
	case 4:
		note(fi_writev(ep, iov, desc, count, addr, raddr, key, ctx));
		break;
	case 5:
		note(fi_writemsg(ep, &m, flags));
		break;
	case 6:
		note(fi_inject_write(ep, buf, len, addr, raddr, key));
		break;
	case 7:
		note(fi_writedata(ep, buf, len, desc[0], data, addr, raddr, key, ctx));
		break;
	default:
		note(fi_inject_writedata(ep, buf, len, data, addr, raddr, key));
		break;
	}
}

static void op_atomic(struct fz_reader *r, struct world *w)
{
	struct fid_ep *ep = pick_ep(r, w);
	enum fi_op op =
	    (enum fi_op)(fz_below(r, 4) ? fz_below(r, FI_ATOMIC_OP_LAST + 2) : fz_u32(r));
	enum fi_datatype dt =
	    (enum fi_datatype)(fz_below(r, 4) ? fz_below(r, 20) : fz_u32(r));
	size_t cnt = fz_below(r, 3) ? fz_below(r, 9) : (size_t)fz_size(r);
	size_t room = BUF_SIZE / 32, vcount;
	/* Operand, compare and result buffers: each BUF_SIZE bytes, so any
	 * count the call accepts fits (at most 32 bytes an element). */
	void *res = bufs[2], *cmp = bufs[3], *src = bufs[4];
	fi_addr_t addr = pick_addr(r, w);
	uint64_t raddr =
	    fz_below(r, 3) ? (uint64_t)(uintptr_t)bufs[0] + fz_u16(r) % 4096 : fz_u64(r);
	uint64_t key = fz_below(r, 3) ? w->mr_key : fz_u64(r);
	void *ctx = pick_ctx(r);
	struct fi_ioc ioc[2], rioc[2], cioc[2];
	struct fi_rma_ioc rma[2];
	struct fi_msg_atomic m;
	uint64_t flags = pick_flags(r);

	if (cnt > room) /* what our buffers can hold; the call may refuse less */
		cnt = room;
	/* Two of each, so any count up to 2 the program passes is true;
	 * their lengths together stay within the buffers. */
	for (int i = 0; i < 2; i++) {
		ioc[i] = (struct fi_ioc){(char *)src + i * BUF_SIZE / 2, cnt / 2};
		rioc[i] = (struct fi_ioc){(char *)res + i * BUF_SIZE / 2, cnt / 2};
		cioc[i] = (struct fi_ioc){(char *)cmp + i * BUF_SIZE / 2, cnt / 2};
		rma[i] = (struct fi_rma_ioc){raddr, i ? cnt / 2 : fz_size(r), key};
	}
	m = (struct fi_msg_atomic){
	    ioc, NULL, fz_below(r, 3), addr, rma, fz_below(r, 3), dt, op, ctx, fz_u64(r)};
	switch (fz_below(r, 10)) {
	case 0:
		note(fi_atomic(ep, src, cnt, NULL, addr, raddr, key, dt, op, ctx));
		break;
	case 1:
		note(fi_atomicv(ep, ioc, NULL, fz_below(r, 3), addr, raddr, key, dt, op,
		                ctx));
		break;
	case 2:
		note(fi_atomicmsg(ep, &m, flags));
		break;
	case 3:
		note(fi_inject_atomic(ep, src, cnt, addr, raddr, key, dt, op));
		break;
	case 4:
		note(fi_fetch_atomic(ep, src, cnt, NULL, res, NULL, addr, raddr, key, dt,
		                     op, ctx));
		break;
	case 5:
		note(fi_fetch_atomicmsg(ep, &m, rioc, NULL, fz_below(r, 3), flags));
		break;
	case 6:
		note(fi_compare_atomic(ep, src, cnt, NULL, cmp, NULL, res, NULL, addr,
		                       raddr, key, dt, op, ctx));
		break;
	case 7:
		note(fi_compare_atomicmsg(ep, &m, cioc, NULL, fz_below(r, 3), rioc, NULL,
		                          fz_below(r, 3), flags));
		break;
	default:
		vcount = 0;
		switch (fz_below(r, 3)) {
		case 0:
			note(fi_atomicvalid(ep, dt, op, &vcount));
			break;
		case 1:
			note(fi_fetch_atomicvalid(ep, dt, op, &vcount));
			break;
		default:
			note(fi_compare_atomicvalid(ep, dt, op, &vcount));
			break;
		}
		break;
	}
}

static void op_read(struct fz_reader *r, struct world *w)
{
	static struct fi_cq_err_entry entries[16];
	static uint8_t err_data[256];
	static char text[256];
	fi_addr_t src[16];
	size_t count = fz_below(r, 17);
	struct fid_cq *cq = (struct fid_cq *)pick_obj(r, w, K_CQ);
	struct fid_cntr *cntr = (struct fid_cntr *)pick_obj(r, w, K_CNTR);
	struct fi_cq_err_entry ee = {0};
	int timeout = fz_below(r, 3);

	switch (fz_below(r, 12)) {
	case 0:
	case 1:
		note(fi_cq_read(cq, entries, count));
		break;
	case 2:
		note(fi_cq_readfrom(cq, entries, count, src));
		break;
	case 3:
		ee.err_data = fz_below(r, 2) ? err_data : NULL;
		ee.err_data_size = ee.err_data ? fz_below(r, sizeof(err_data) + 1) : 0;
		note(fi_cq_readerr(cq, &ee, fz_flags(r, 0)));
		(void)fi_cq_strerror(cq, ee.prov_errno, ee.err_data, text,
		                     fz_below(r, sizeof(text) + 1));
		break;
	case 4:
		note(fi_cq_sread(cq, entries, count, NULL, timeout));
		break;
	case 5:
		note(fi_cq_signal(cq));
		break;
	case 6:
		(void)fi_cntr_read(cntr);
		(void)fi_cntr_readerr(cntr);
		calls++;
		break;
	case 7:
		note(fi_cntr_add(cntr, fz_size(r)));
		break;
	case 8:
		note(fz_below(r, 2) ? fi_cntr_set(cntr, fz_size(r))
		                    : fi_cntr_seterr(cntr, 0));
		break;
	case 9:
		note(fi_cntr_wait(cntr, fz_size(r), timeout));
		break;
	default: {
		struct fid_eq *eq = (struct fid_eq *)w->slot[K_EQ][fz_below(r, NSLOT)];
		struct fi_eq_err_entry eqe = {0};
		uint32_t event;
		size_t len = fz_below(r, 257);

		if (!eq)
			break;
		switch (fz_below(r, 4)) {
		case 0:
			note(fi_eq_read(eq, &event, text, len, fz_flags(r, FI_PEEK)));
			break;
		case 1:
			note(fi_eq_readerr(eq, &eqe, 0));
			break;
		case 2:
			note(fi_eq_write(eq, fz_u32(r), text, len, fz_flags(r, 0)));
			break;
		default:
			note(fi_eq_sread(eq, &event, text, len, timeout, 0));
			break;
		}
		break;
	}
	}
}

static void op_misc(struct fz_reader *r, struct world *w)
{
	static uint8_t scratch[SCRATCH];
	unsigned what = fz_below(r, 6);
	struct fid_ep *ep = pick_any_ep(r, w, what < 3);
	size_t len = fz_below(r, 65), n;
	uint8_t opt[64];

	memset(opt, 0, sizeof(opt));
	if (trace)
		fprintf(stderr, "  misc %u ep %p\n", what, (void *)ep);
	switch (what) {
	case 0:
		note(fi_cancel(&ep->fid, fz_below(r, 8) ? pick_ctx(r)
		                                        : (void *)(uintptr_t)fz_u64(r)));
		break;
	case 1:
		for (size_t i = 0; i < len; i++)
			opt[i] = fz_u8(r);
		note(fi_setopt(
		    &ep->fid, fz_below(r, 3) ? FI_OPT_ENDPOINT : (int)fz_u32(r),
		    fz_below(r, 3) ? (int)fz_below(r, 24) : (int)fz_u32(r), opt, len));
		break;
	case 2:
		note(fi_getopt(
		    &ep->fid, fz_below(r, 3) ? FI_OPT_ENDPOINT : (int)fz_u32(r),
		    fz_below(r, 3) ? (int)fz_below(r, 24) : (int)fz_u32(r), opt, &len));
		FZ_CHECK(len <= (1u << 20), "fi_getopt: length %zu", len);
		break;
	case 3:
		len = fz_below(r, 257);
		note(fi_getname(&ep->fid, scratch, &len));
		break;
	case 4:
		n = fill_scratch(r, scratch, 256);
		if (w->tcp)
			fence_sockaddr(scratch, n);
		if (w->tcp && w->info->addr_format == FI_ADDR_STR)
			break;
		note(
		    fi_setname(&ep->fid, scratch, fz_below(r, 2) ? n : fz_below(r, 257)));
		break;
	default: /* progress: what A and B have to say */
		for (int i = 0; i < 8; i++) {
			struct fi_cq_tagged_entry e[8];

			(void)fi_cq_read(w->cq[0], e, 8);
			(void)fi_cq_read(w->cq[1], e, 8);
		}
		calls++;
		break;
	}
}

/* The calls a step makes, each as often as it is listed. */
static void (*const ops[])(struct fz_reader *, struct world *) = {
    op_open, op_open, op_sep_ctx, op_bind, op_control, op_close, op_av,   op_av,
    op_msg,  op_msg,  op_msg,     op_rma,  op_atomic,  op_read,  op_read, op_misc};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_reader r = {data, size};
	struct world w;
	bool tcp = fz_u8(&r) & 1;
	int steps = 0;

	if (trace < 0)
		trace = getenv("FZ_TRACE") != NULL;
	if (!infos[tcp])
		infos[tcp] = ask(tcp);
	if (!bufs[0])
		for (int i = 0; i < NBUF; i++)
			FZ_CHECK((bufs[i] = malloc(BUF_SIZE)), "out of memory");
	runs++;
	if (!world_open(&w, tcp)) {
		/* Only a machine out of ports or memory gets here. */
		world_fail++;
		world_close(&w);
		return 0;
	}
	while (fz_more(&r) && steps++ < 256) {
		memset(ctxs, 0, sizeof(ctxs));
		unsigned k = fz_below(&r, sizeof(ops) / sizeof(*ops));

		if (trace) /* FZ_TRACE=1: which step, at which byte */
			fprintf(stderr, "step %d: op %u at byte %zu\n", steps, k,
			        size - r.n);
		ops[k](&r, &w);
	}
	world_close(&w);
	return 0;
}

/* Inputs: a provider byte, then choices; most choices are small numbers. */
size_t fz_generate(uint64_t *rng, uint8_t *buf, size_t cap)
{
	size_t n = 8 + (size_t)(fz_rand(rng) % 1500);

	if (n > cap)
		n = cap;
	for (size_t i = 0; i < n; i++) {
		uint64_t v = fz_rand(rng);

		buf[i] = (uint8_t)(v % 3 ? v % 20 : v >> 16);
	}
	return n;
}

int fz_write_seeds(const char *dir)
{
	uint64_t rng = 0x6170692d66757aULL; /* "api-fuz" */

	for (int i = 0; i < 32; i++) {
		uint8_t b[2048];
		size_t n = fz_generate(&rng, b, sizeof(b));
		char name[16];

		b[0] = (uint8_t)i; /* shm and tcp alike */
		snprintf(name, sizeof(name), "seed-%02d", i);
		if (fz_save(dir, name, b, n))
			return -1;
	}
	return 0;
}

/* After the run, on each provider, a fresh world still carries a message
 * from A to B intact. */
void fz_final_check(void)
{
	for (int tcp = 0; tcp < 2; tcp++) {
		struct world w;
		struct fi_cq_tagged_entry e;
		int got = 0;

		if (!infos[tcp])
			infos[tcp] = ask(tcp);
		FZ_CHECK(world_open(&w, tcp), "a fresh world on %s", tcp ? "tcp" : "shm");
		memset(bufs[5], 0, 4096);
		for (int i = 0; i < 4096; i++)
			bufs[6][i] = (uint8_t)(i * 13 + tcp);
		FZ_CHECK(fi_recv(w.ep[1], bufs[5], 4096, NULL, w.fa[0], NULL) == 0,
		         "recv");
		FZ_CHECK(fi_send(w.ep[0], bufs[6], 4096, NULL, w.fa[1], NULL) == 0,
		         "send");
		for (long spin = 0; got < 2 && spin < 20000000; spin++) {
			got += fi_cq_read(w.cq[0], &e, 1) == 1;
			got += fi_cq_read(w.cq[1], &e, 1) == 1;
		}
		FZ_CHECK(got == 2 && !memcmp(bufs[5], bufs[6], 4096),
		         "A to B on %s after the run", tcp ? "tcp" : "shm");
		world_close(&w);
	}
}

void fz_report(void)
{
	fprintf(stderr,
	        "api: %lu programs, %lu calls (%lu refused), %lu worlds not opened\n",
	        runs, calls, errors, world_fail);
}
