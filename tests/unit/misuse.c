/* misuse.c - every data and control call of the API with bad arguments:
 * addresses not in the AV, NULL buffers with lengths, iov
 * counts past the limits, unknown flags, objects used before bind or
 * enable, closes with bound children, bad attributes at open, bad keys,
 * datatypes and ops, unknown options and commands.  Each must return a
 * negative FI_E* (the code the man page names, where it names one), never
 * success, never crash.  Every case runs in a forked child on a fresh
 * fixture (two enabled RDM endpoints on one domain, each other's address
 * in a shared AV), once per provider (shm, tcp): a crash or a sanitizer
 * report is one failed case and the rest still run. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
/* The calls libfabric 2.x deprecated (wait and poll sets, fi_av_bind) are
 * tested here on purpose: 1.x programs still make them. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <dlfcn.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_trigger.h>

#include "check.h"
#include "provs.h"

/* Bits no flag, capability or access right of the API uses. */
#define UNKNOWN_FLAG  (1ULL << 15)
#define UNKNOWN_FLAG2 (1ULL << 40)

#define BUFSZ 4096
#define PAT_T 0x5a /* the target buffer's bytes, which no rejected op may touch */

/* Everything a case starts from: two enabled endpoints A (0) and B (1) on
 * one domain, each with its own CQ, both addresses in one AV; A's buffer
 * and B's target buffer registered. */
struct fx {
	const char *prov;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq[2];
	struct fid_ep *ep[2];
	fi_addr_t addr[2];
	struct fid_mr *lmr, *tmr;
	void *ldesc;
	uint64_t tkey;
	uint64_t tbase; /* B's buffer as a remote address */
	uint64_t *lbuf, *tbuf;
};

static const char *cur_prov = "", *cur_case = "";

/* got must be negative, a known FI_E* value, and one of codes[] (positive
 * FI_E* values) unless codes[0] is 0 (any error). */
static void expect_err(const char *file, int line, const char *expr, long long got,
                       const int *codes, size_t n)
{
	bool ok = got < 0 && -got < FI_ERRNO_MAX;

	check_count++;
	if (ok && codes[0]) {
		ok = false;
		for (size_t i = 0; i < n; i++)
			ok |= -got == codes[i];
	}
	if (ok)
		return;
	check_failures++;
	fprintf(stderr, "%s:%d: [%s %s] %s = %lld (%s), want ", file, line, cur_prov,
	        cur_case, expr, got, got < 0 ? fi_strerror((int)-got) : "success");
	if (!codes[0])
		fprintf(stderr, "a negative FI_E* code\n");
	for (size_t i = 0; codes[0] && i < n; i++)
		fprintf(stderr, "-%s%s", fi_strerror(codes[i]),
		        i + 1 < n ? " or " : "\n");
}

#define NCODES(...) (sizeof((const int[]){__VA_ARGS__}) / sizeof(int))
/* ERR(call): any negative FI_E*.  ERR(call, FI_EINVAL, ...): one of those. */
#define ERR_IS(call, ...)                                                                \
	expect_err(__FILE__, __LINE__, #call, (long long)(call),                         \
	           (const int[]){__VA_ARGS__}, NCODES(__VA_ARGS__))
#define ERR(call) ERR_IS(call, 0)
#define OK(call)  CHECK_INT(call, 0)

/* ------------------------------------------------------------------ fixture */

static struct fi_info *hints_for(const char *prov)
{
	struct fi_info *h = fi_allocinfo();

	h->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_DIRECTED_RECV;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->mr_mode =
	    FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_LOCAL;
	h->fabric_attr->prov_name = strdup(prov);
	return h;
}

static struct fid_cq *open_cq(struct fid_domain *d)
{
	struct fi_cq_attr a = {.format = FI_CQ_FORMAT_TAGGED, .size = 64};
	struct fid_cq *cq = NULL;

	OK(fi_cq_open(d, &a, &cq, NULL));
	return cq;
}

static int fx_open(struct fx *f, const char *prov)
{
	struct fi_info *h = hints_for(prov);
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	int ret;

	memset(f, 0, sizeof(*f));
	f->prov = prov;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &f->info);
	fi_freeinfo(h);
	if (ret) {
		fprintf(stderr, "fi_getinfo(%s): %s\n", prov, fi_strerror(-ret));
		return ret;
	}
#define TRY(x)                                                                           \
	do {                                                                             \
		if ((ret = (x))) {                                                       \
			fprintf(stderr, "fixture: %s: %s\n", #x, fi_strerror(-ret));     \
			return ret;                                                      \
		}                                                                        \
	} while (0)
	TRY(fi_fabric(f->info->fabric_attr, &f->fabric, NULL));
	TRY(fi_domain(f->fabric, f->info, &f->domain, NULL));
	TRY(fi_av_open(f->domain, &av_attr, &f->av, NULL));
	for (int i = 0; i < 2; i++) {
		char name[256];
		size_t len = sizeof(name);

		f->cq[i] = open_cq(f->domain);
		if (!f->cq[i])
			return -FI_EOTHER;
		TRY(fi_endpoint(f->domain, f->info, &f->ep[i], NULL));
		TRY(fi_ep_bind(f->ep[i], &f->cq[i]->fid, FI_TRANSMIT | FI_RECV));
		TRY(fi_ep_bind(f->ep[i], &f->av->fid, 0));
		TRY(fi_enable(f->ep[i]));
		TRY(fi_getname(&f->ep[i]->fid, name, &len));
		if (fi_av_insert(f->av, name, 1, &f->addr[i], 0, NULL) != 1) {
			fprintf(stderr, "fixture: fi_av_insert failed\n");
			return -FI_EOTHER;
		}
	}
	f->lbuf = aligned_alloc(64, BUFSZ);
	f->tbuf = aligned_alloc(64, BUFSZ);
	memset(f->lbuf, 0x11, BUFSZ);
	memset(f->tbuf, PAT_T, BUFSZ);
	TRY(fi_mr_reg(f->domain, f->lbuf, BUFSZ, FI_SEND | FI_RECV | FI_READ | FI_WRITE,
	              0, 1, 0, &f->lmr, NULL));
	TRY(fi_mr_reg(f->domain, f->tbuf, BUFSZ, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 2,
	              0, &f->tmr, NULL));
	f->ldesc = fi_mr_desc(f->lmr);
	f->tkey = fi_mr_key(f->tmr);
	f->tbase =
	    (f->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uintptr_t)f->tbuf : 0;
#undef TRY
	return 0;
}

/* Closes in the right order must all succeed. */
static void fx_close(struct fx *f)
{
	for (int i = 0; i < 2; i++)
		if (f->ep[i])
			OK(fi_close(&f->ep[i]->fid));
	if (f->lmr)
		OK(fi_close(&f->lmr->fid));
	if (f->tmr)
		OK(fi_close(&f->tmr->fid));
	for (int i = 0; i < 2; i++)
		if (f->cq[i])
			OK(fi_close(&f->cq[i]->fid));
	if (f->av)
		OK(fi_close(&f->av->fid));
	if (f->domain)
		OK(fi_close(&f->domain->fid));
	if (f->fabric)
		OK(fi_close(&f->fabric->fid));
	fi_freeinfo(f->info);
	free(f->lbuf);
	free(f->tbuf);
}

static bool target_untouched(struct fx *f)
{
	const unsigned char *p = (const unsigned char *)f->tbuf;

	for (size_t i = 0; i < BUFSZ; i++)
		if (p[i] != PAT_T) {
			fprintf(stderr, "[%s %s] target byte %zu changed to 0x%02x\n",
			        cur_prov, cur_case, i, p[i]);
			return false;
		}
	return true;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* An operation the initiator cannot refuse at once (a key only the target
 * knows): either the call failed, or its completion on A's CQ is an error.
 * B is progressed meanwhile.  The target must be untouched either way. */
static void expect_fail_async(struct fx *f, const char *what, ssize_t ret)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	uint64_t end = now_ms() + 3000;
	ssize_t n = -FI_EAGAIN;

	check_count++;
	if (ret < 0) {
		if (-ret >= FI_ERRNO_MAX || ret == -FI_EAGAIN) {
			fprintf(stderr, "[%s %s] %s = %zd, not an FI_E* error\n",
			        cur_prov, cur_case, what, ret);
			check_failures++;
		}
		goto out;
	}
	while (now_ms() < end) {
		fi_cq_read(f->cq[1], NULL, 0);
		n = fi_cq_read(f->cq[0], &e, 1);
		if (n != -FI_EAGAIN)
			break;
		usleep(1000);
	}
	if (n == -FI_EAVAIL) {
		memset(&err, 0, sizeof(err));
		if (fi_cq_readerr(f->cq[0], &err, 0) != 1 || err.err <= 0) {
			fprintf(stderr, "[%s %s] %s: fi_cq_readerr gave no error\n",
			        cur_prov, cur_case, what);
			check_failures++;
		}
	} else {
		fprintf(stderr, "[%s %s] %s was accepted and %s\n", cur_prov, cur_case,
		        what, n == 1 ? "completed successfully" : "never completed");
		check_failures++;
	}
out:
	CHECK(target_untouched(f));
}
#define ASYNC_FAIL(call) expect_fail_async(f, #call, (ssize_t)(call))

/* A fresh endpoint from the fixture's info, nothing bound. */
static struct fid_ep *fresh_ep(struct fx *f)
{
	struct fid_ep *ep = NULL;

	OK(fi_endpoint(f->domain, f->info, &ep, NULL));
	return ep;
}

/* ----------------------------------------------------- data calls, shared */

/* Every transmit-side data call on ep with destination dest and otherwise
 * valid arguments: each must fail with one of codes (0: any).  Tagged
 * calls must give -FI_EINVAL where an argument is invalid (fi_tagged(3)). */
static void all_tx_calls(struct fx *f, struct fid_ep *ep, fi_addr_t dest, int code,
                         int tcode, const char *why)
{
	struct iovec iov = {f->lbuf, 16};
	void *desc = f->ldesc;
	struct fi_msg msg = {
	    .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = dest};
	struct fi_msg_tagged tmsg = {
	    .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = dest, .tag = 7};
	struct fi_rma_iov riov = {f->tbase, 16, f->tkey};
	struct fi_msg_rma rmsg = {.msg_iov = &iov,
	                          .desc = &desc,
	                          .iov_count = 1,
	                          .addr = dest,
	                          .rma_iov = &riov,
	                          .rma_iov_count = 1};
	struct fi_ioc ioc = {f->lbuf, 1}, rioc = {f->lbuf + 8, 1},
	              cioc = {f->lbuf + 16, 1};
	struct fi_rma_ioc rai = {f->tbase, 1, f->tkey};
	struct fi_msg_atomic amsg = {.msg_iov = &ioc,
	                             .desc = &desc,
	                             .iov_count = 1,
	                             .addr = dest,
	                             .rma_iov = &rai,
	                             .rma_iov_count = 1,
	                             .datatype = FI_UINT64,
	                             .op = FI_SUM};
	void *b = f->lbuf;

	cur_case = why;
	ERR_IS(fi_send(ep, b, 16, desc, dest, NULL), code);
	ERR_IS(fi_sendv(ep, &iov, &desc, 1, dest, NULL), code);
	ERR_IS(fi_sendmsg(ep, &msg, 0), code);
	ERR_IS(fi_inject(ep, b, 16, dest), code);
	ERR_IS(fi_senddata(ep, b, 16, desc, 9, dest, NULL), code);
	ERR_IS(fi_injectdata(ep, b, 16, 9, dest), code);
	ERR_IS(fi_tsend(ep, b, 16, desc, dest, 7, NULL), tcode);
	ERR_IS(fi_tsendv(ep, &iov, &desc, 1, dest, 7, NULL), tcode);
	ERR_IS(fi_tsendmsg(ep, &tmsg, 0), tcode);
	ERR_IS(fi_tinject(ep, b, 16, dest, 7), tcode);
	ERR_IS(fi_tsenddata(ep, b, 16, desc, 9, dest, 7, NULL), tcode);
	ERR_IS(fi_tinjectdata(ep, b, 16, 9, dest, 7), tcode);
	ERR_IS(fi_read(ep, b, 16, desc, dest, f->tbase, f->tkey, NULL), code);
	ERR_IS(fi_readv(ep, &iov, &desc, 1, dest, f->tbase, f->tkey, NULL), code);
	ERR_IS(fi_readmsg(ep, &rmsg, 0), code);
	ERR_IS(fi_write(ep, b, 16, desc, dest, f->tbase, f->tkey, NULL), code);
	ERR_IS(fi_writev(ep, &iov, &desc, 1, dest, f->tbase, f->tkey, NULL), code);
	ERR_IS(fi_writemsg(ep, &rmsg, 0), code);
	ERR_IS(fi_writedata(ep, b, 16, desc, 9, dest, f->tbase, f->tkey, NULL), code);
	ERR_IS(fi_inject_write(ep, b, 16, dest, f->tbase, f->tkey), code);
	ERR_IS(fi_inject_writedata(ep, b, 16, 9, dest, f->tbase, f->tkey), code);
	ERR_IS(
	    fi_atomic(ep, b, 1, desc, dest, f->tbase, f->tkey, FI_UINT64, FI_SUM, NULL),
	    code);
	ERR_IS(fi_atomicv(ep, &ioc, &desc, 1, dest, f->tbase, f->tkey, FI_UINT64, FI_SUM,
	                  NULL),
	       code);
	ERR_IS(fi_atomicmsg(ep, &amsg, 0), code);
	ERR_IS(fi_inject_atomic(ep, b, 1, dest, f->tbase, f->tkey, FI_UINT64, FI_SUM),
	       code);
	ERR_IS(fi_fetch_atomic(ep, b, 1, desc, f->lbuf + 8, desc, dest, f->tbase, f->tkey,
	                       FI_UINT64, FI_SUM, NULL),
	       code);
	ERR_IS(fi_fetch_atomicv(ep, &ioc, &desc, 1, &rioc, &desc, 1, dest, f->tbase,
	                        f->tkey, FI_UINT64, FI_SUM, NULL),
	       code);
	ERR_IS(fi_fetch_atomicmsg(ep, &amsg, &rioc, &desc, 1, 0), code);
	ERR_IS(fi_compare_atomic(ep, b, 1, desc, f->lbuf + 16, desc, f->lbuf + 8, desc,
	                         dest, f->tbase, f->tkey, FI_UINT64, FI_CSWAP, NULL),
	       code);
	amsg.op = FI_CSWAP;
	ERR_IS(fi_compare_atomicv(ep, &ioc, &desc, 1, &cioc, &desc, 1, &rioc, &desc, 1,
	                          dest, f->tbase, f->tkey, FI_UINT64, FI_CSWAP, NULL),
	       code);
	ERR_IS(fi_compare_atomicmsg(ep, &amsg, &cioc, &desc, 1, &rioc, &desc, 1, 0),
	       code);
}

static void all_rx_calls(struct fx *f, struct fid_ep *ep, fi_addr_t src, int code,
                         const char *why)
{
	struct iovec iov = {f->lbuf, 16};
	void *desc = f->ldesc;
	struct fi_msg msg = {.msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = src};
	struct fi_msg_tagged tmsg = {
	    .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = src, .tag = 7};

	cur_case = why;
	ERR_IS(fi_recv(ep, f->lbuf, 16, desc, src, NULL), code);
	ERR_IS(fi_recvv(ep, &iov, &desc, 1, src, NULL), code);
	ERR_IS(fi_recvmsg(ep, &msg, 0), code);
	ERR_IS(fi_trecv(ep, f->lbuf, 16, desc, src, 7, 0, NULL), code ? code : FI_EINVAL);
	ERR_IS(fi_trecvv(ep, &iov, &desc, 1, src, 7, 0, NULL), code ? code : FI_EINVAL);
	ERR_IS(fi_trecvmsg(ep, &tmsg, 0), code ? code : FI_EINVAL);
}

/* ------------------------------------------------------------------ cases */

/* fi_addr values not in the AV, FI_ADDR_UNSPEC and FI_ADDR_NOTAVAIL where
 * a real destination is needed, and an address removed from the AV. */
static void case_bad_dest(struct fx *f)
{
	all_tx_calls(f, f->ep[0], 1000, 0, FI_EINVAL, "dest 1000 (not in AV)");
	all_tx_calls(f, f->ep[0], 2, 0, FI_EINVAL, "dest 2 (one past AV)");
	all_tx_calls(f, f->ep[0], FI_ADDR_UNSPEC, 0, FI_EINVAL, "dest FI_ADDR_UNSPEC");
	all_tx_calls(f, f->ep[0], FI_ADDR_NOTAVAIL, 0, FI_EINVAL,
	             "dest FI_ADDR_NOTAVAIL");
	/* Directed receives from an address not in the AV.  (FI_ADDR_NOTAVAIL
	 * is the same value as FI_ADDR_UNSPEC: a receive from any source.) */
	all_rx_calls(f, f->ep[0], 1000, 0, "recv from 1000 (not in AV)");
	all_rx_calls(f, f->ep[0], 2, 0, "recv from 2 (one past AV)");
	/* B removed from the AV: no longer a destination. */
	OK(fi_av_remove(f->av, &f->addr[1], 1, 0));
	all_tx_calls(f, f->ep[0], f->addr[1], 0, FI_EINVAL, "dest removed from AV");
	CHECK(target_untouched(f));
}

/* NULL buffers with non-zero lengths, NULL iov and msg pointers. */
/* A receive with a NULL buffer and a length is taken, as libfabric takes
 * it (programs post such receives for empty messages: fabtests'
 * fi_shared_ctx does), as room for no bytes: a message with data that
 * lands there ends in a truncation error at the receiver, not a crash. */
static void null_receive(struct fx *f)
{
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	uint64_t end = now_ms() + 5000;
	int rctx;
	ssize_t r;

	cur_case = "receive into a NULL buffer";
	OK(fi_recv(f->ep[1], NULL, 16, f->ldesc, FI_ADDR_UNSPEC, &rctx));
	OK(fi_send(f->ep[0], f->lbuf, 16, f->ldesc, f->addr[1], NULL));
	do {
		fi_cq_read(f->cq[0], NULL, 0); /* the sender's progress */
		r = fi_cq_read(f->cq[1], &c, 1);
	} while (r == -FI_EAGAIN && now_ms() < end);
	CHECK_INT(r, -FI_EAVAIL);
	if (r != -FI_EAVAIL)
		return;
	memset(&err, 0, sizeof(err));
	CHECK_INT(fi_cq_readerr(f->cq[1], &err, 0), 1);
	CHECK(err.op_context == &rctx);
	CHECK_INT(err.err, FI_ETRUNC);
	/* The sender's completion, whatever it says, is read away. */
	end = now_ms() + 5000;
	while ((r = fi_cq_read(f->cq[0], &c, 1)) == -FI_EAGAIN && now_ms() < end)
		;
	if (r == -FI_EAVAIL)
		fi_cq_readerr(f->cq[0], &err, 0);
}

static void case_null_buffers(struct fx *f)
{
	struct fid_ep *ep = f->ep[0];
	fi_addr_t d = f->addr[1];
	void *desc = f->ldesc;
	struct iovec niov = {NULL, 16};
	struct fi_msg msg = {.msg_iov = &niov, .desc = &desc, .iov_count = 1, .addr = d};
	struct fi_msg_tagged tmsg = {
	    .msg_iov = &niov, .desc = &desc, .iov_count = 1, .addr = d, .tag = 7};
	struct fi_rma_iov riov = {f->tbase, 16, f->tkey};
	struct fi_msg_rma rmsg = {.msg_iov = &niov,
	                          .desc = &desc,
	                          .iov_count = 1,
	                          .addr = d,
	                          .rma_iov = &riov,
	                          .rma_iov_count = 1};
	struct fi_ioc nioc = {NULL, 1}, ioc = {f->lbuf, 1};
	struct fi_rma_ioc rai = {f->tbase, 1, f->tkey};
	struct fi_msg_atomic amsg = {.msg_iov = &nioc,
	                             .desc = &desc,
	                             .iov_count = 1,
	                             .addr = d,
	                             .rma_iov = &rai,
	                             .rma_iov_count = 1,
	                             .datatype = FI_UINT64,
	                             .op = FI_SUM};

	cur_case = "NULL buffer, length 16";
	ERR(fi_send(ep, NULL, 16, desc, d, NULL));
	ERR(fi_sendv(ep, &niov, &desc, 1, d, NULL));
	ERR(fi_sendmsg(ep, &msg, 0));
	ERR(fi_inject(ep, NULL, 16, d));
	ERR(fi_senddata(ep, NULL, 16, desc, 9, d, NULL));
	ERR(fi_injectdata(ep, NULL, 16, 9, d));
	ERR_IS(fi_tsend(ep, NULL, 16, desc, d, 7, NULL), FI_EINVAL);
	ERR_IS(fi_tsendv(ep, &niov, &desc, 1, d, 7, NULL), FI_EINVAL);
	ERR_IS(fi_tsendmsg(ep, &tmsg, 0), FI_EINVAL);
	ERR_IS(fi_tinject(ep, NULL, 16, d, 7), FI_EINVAL);
	ERR_IS(fi_tsenddata(ep, NULL, 16, desc, 9, d, 7, NULL), FI_EINVAL);
	ERR_IS(fi_tinjectdata(ep, NULL, 16, 9, d, 7), FI_EINVAL);
	null_receive(f);
	ERR(fi_read(ep, NULL, 16, desc, d, f->tbase, f->tkey, NULL));
	ERR(fi_readv(ep, &niov, &desc, 1, d, f->tbase, f->tkey, NULL));
	ERR(fi_readmsg(ep, &rmsg, 0));
	ERR(fi_write(ep, NULL, 16, desc, d, f->tbase, f->tkey, NULL));
	ERR(fi_writev(ep, &niov, &desc, 1, d, f->tbase, f->tkey, NULL));
	ERR(fi_writemsg(ep, &rmsg, 0));
	ERR(fi_writedata(ep, NULL, 16, desc, 9, d, f->tbase, f->tkey, NULL));
	ERR(fi_inject_write(ep, NULL, 16, d, f->tbase, f->tkey));
	ERR(fi_inject_writedata(ep, NULL, 16, 9, d, f->tbase, f->tkey));
	ERR(fi_atomic(ep, NULL, 1, desc, d, f->tbase, f->tkey, FI_UINT64, FI_SUM, NULL));
	ERR(fi_atomicv(ep, &nioc, &desc, 1, d, f->tbase, f->tkey, FI_UINT64, FI_SUM,
	               NULL));
	ERR(fi_atomicmsg(ep, &amsg, 0));
	ERR(fi_inject_atomic(ep, NULL, 1, d, f->tbase, f->tkey, FI_UINT64, FI_SUM));
	/* The fetch result and compare buffers, each missing alone. */
	cur_case = "NULL result/compare buffer";
	ERR(fi_fetch_atomic(ep, f->lbuf, 1, desc, NULL, desc, d, f->tbase, f->tkey,
	                    FI_UINT64, FI_SUM, NULL));
	ERR(fi_fetch_atomicv(ep, &ioc, &desc, 1, &nioc, &desc, 1, d, f->tbase, f->tkey,
	                     FI_UINT64, FI_SUM, NULL));
	ERR(fi_compare_atomic(ep, f->lbuf, 1, desc, NULL, desc, f->lbuf + 8, desc, d,
	                      f->tbase, f->tkey, FI_UINT64, FI_CSWAP, NULL));
	ERR(fi_compare_atomic(ep, f->lbuf, 1, desc, f->lbuf + 16, desc, NULL, desc, d,
	                      f->tbase, f->tkey, FI_UINT64, FI_CSWAP, NULL));
	amsg.msg_iov = &ioc;
	amsg.op = FI_CSWAP;
	ERR(fi_compare_atomicmsg(ep, &amsg, &nioc, &desc, 1, &ioc, &desc, 1, 0));
	/* No iov array at all, or no message structure. */
	cur_case = "NULL iov/msg";
	ERR(fi_sendv(ep, NULL, &desc, 1, d, NULL));
	ERR(fi_recvv(ep, NULL, &desc, 1, FI_ADDR_UNSPEC, NULL));
	ERR_IS(fi_tsendv(ep, NULL, &desc, 1, d, 7, NULL), FI_EINVAL);
	ERR(fi_writev(ep, NULL, &desc, 1, d, f->tbase, f->tkey, NULL));
	ERR(fi_atomicv(ep, NULL, &desc, 1, d, f->tbase, f->tkey, FI_UINT64, FI_SUM,
	               NULL));
	ERR(fi_sendmsg(ep, NULL, 0));
	ERR(fi_recvmsg(ep, NULL, 0));
	ERR_IS(fi_tsendmsg(ep, NULL, 0), FI_EINVAL);
	ERR_IS(fi_trecvmsg(ep, NULL, 0), FI_EINVAL);
	ERR(fi_readmsg(ep, NULL, 0));
	ERR(fi_writemsg(ep, NULL, 0));
	ERR(fi_atomicmsg(ep, NULL, 0));
	msg.msg_iov = NULL;
	msg.addr = d;
	ERR(fi_sendmsg(ep, &msg, 0));
	rmsg.msg_iov = &(struct iovec){f->lbuf, 16};
	rmsg.rma_iov = NULL;
	ERR(fi_writemsg(ep, &rmsg, 0));
	ERR(fi_readmsg(ep, &rmsg, 0));
	amsg.msg_iov = &ioc;
	amsg.op = FI_SUM;
	amsg.rma_iov = NULL;
	ERR(fi_atomicmsg(ep, &amsg, 0));
	CHECK(target_untouched(f));
}

/* iov counts one past the endpoint's limits, and lengths whose sum wraps. */
static void case_iov_limits(struct fx *f)
{
	struct fid_ep *ep = f->ep[0];
	fi_addr_t d = f->addr[1];
	size_t txn = f->info->tx_attr->iov_limit + 1,
	       rxn = f->info->rx_attr->iov_limit + 1;
	size_t rman = f->info->tx_attr->rma_iov_limit + 1;
	size_t n = txn > rxn ? txn : rxn;
	struct iovec *iov = calloc(n, sizeof(*iov));
	void **desc = calloc(n, sizeof(*desc));
	struct fi_ioc *ioc = calloc(n, sizeof(*ioc));
	struct fi_rma_iov *riov = calloc(rman, sizeof(*riov));
	struct fi_rma_ioc *rai = calloc(rman, sizeof(*rai));
	struct fi_rma_iov riov1 = {f->tbase, 8, f->tkey};
	struct fi_rma_ioc rai1 = {f->tbase, 1, f->tkey};

	for (size_t i = 0; i < n; i++) {
		iov[i] = (struct iovec){f->lbuf + i, 8};
		ioc[i] = (struct fi_ioc){f->lbuf + i, 1};
		desc[i] = f->ldesc;
	}
	for (size_t i = 0; i < rman; i++) {
		riov[i] = (struct fi_rma_iov){f->tbase + 8 * i, 8, f->tkey};
		rai[i] = (struct fi_rma_ioc){f->tbase + 8 * i, 1, f->tkey};
	}
	struct fi_msg msg = {.msg_iov = iov, .desc = desc, .iov_count = txn, .addr = d};
	struct fi_msg_tagged tmsg = {
	    .msg_iov = iov, .desc = desc, .iov_count = txn, .addr = d};
	struct fi_msg_rma rmsg = {.msg_iov = iov,
	                          .desc = desc,
	                          .iov_count = txn,
	                          .addr = d,
	                          .rma_iov = &riov1,
	                          .rma_iov_count = 1};
	struct fi_msg_atomic amsg = {.msg_iov = ioc,
	                             .desc = desc,
	                             .iov_count = txn,
	                             .addr = d,
	                             .rma_iov = &rai1,
	                             .rma_iov_count = 1,
	                             .datatype = FI_UINT64,
	                             .op = FI_SUM};

	cur_case = "iov_count = tx iov_limit + 1";
	ERR(fi_sendv(ep, iov, desc, txn, d, NULL));
	ERR(fi_sendmsg(ep, &msg, 0));
	ERR_IS(fi_tsendv(ep, iov, desc, txn, d, 7, NULL), FI_EINVAL);
	ERR_IS(fi_tsendmsg(ep, &tmsg, 0), FI_EINVAL);
	ERR(fi_readv(ep, iov, desc, txn, d, f->tbase, f->tkey, NULL));
	ERR(fi_writev(ep, iov, desc, txn, d, f->tbase, f->tkey, NULL));
	ERR(fi_readmsg(ep, &rmsg, 0));
	ERR(fi_writemsg(ep, &rmsg, 0));
	ERR(fi_atomicv(ep, ioc, desc, txn, d, f->tbase, f->tkey, FI_UINT64, FI_SUM,
	               NULL));
	ERR(fi_atomicmsg(ep, &amsg, 0));
	ERR(fi_fetch_atomicv(ep, ioc, desc, txn, ioc, desc, 1, d, f->tbase, f->tkey,
	                     FI_UINT64, FI_SUM, NULL));
	ERR(fi_fetch_atomicv(ep, ioc, desc, 1, ioc, desc, txn, d, f->tbase, f->tkey,
	                     FI_UINT64, FI_SUM, NULL));
	ERR(fi_compare_atomicv(ep, ioc, desc, 1, ioc, desc, txn, ioc, desc, 1, d,
	                       f->tbase, f->tkey, FI_UINT64, FI_CSWAP, NULL));

	cur_case = "rma_iov_count = rma_iov_limit + 1";
	rmsg.iov_count = 1;
	rmsg.rma_iov = riov;
	rmsg.rma_iov_count = rman;
	ERR(fi_readmsg(ep, &rmsg, 0));
	ERR(fi_writemsg(ep, &rmsg, 0));
	amsg.iov_count = 1;
	amsg.rma_iov = rai;
	amsg.rma_iov_count = rman;
	ERR(fi_atomicmsg(ep, &amsg, 0));

	cur_case = "iov_count = rx iov_limit + 1";
	msg.iov_count = rxn;
	msg.addr = FI_ADDR_UNSPEC;
	tmsg.iov_count = rxn;
	tmsg.addr = FI_ADDR_UNSPEC;
	ERR(fi_recvv(ep, iov, desc, rxn, FI_ADDR_UNSPEC, NULL));
	ERR(fi_recvmsg(ep, &msg, 0));
	ERR_IS(fi_trecvv(ep, iov, desc, rxn, FI_ADDR_UNSPEC, 7, 0, NULL), FI_EINVAL);
	ERR_IS(fi_trecvmsg(ep, &tmsg, 0), FI_EINVAL);

	/* Two lengths that wrap to 16 bytes: the sum is past max_msg_size,
	 * whatever the modular arithmetic says. */
	cur_case = "iov lengths summing past SIZE_MAX";
	iov[0] = (struct iovec){f->lbuf, SIZE_MAX - 7};
	iov[1] = (struct iovec){f->lbuf + 1, 24};
	ERR(fi_sendv(ep, iov, desc, 2, d, NULL));
	ERR_IS(fi_tsendv(ep, iov, desc, 2, d, 7, NULL), FI_EINVAL);
	ERR(fi_writev(ep, iov, desc, 2, d, f->tbase, f->tkey, NULL));
	ERR(fi_readv(ep, iov, desc, 2, d, f->tbase, f->tkey, NULL));
	ERR(fi_recvv(ep, iov, desc, 2, FI_ADDR_UNSPEC, NULL));
	ERR_IS(fi_trecvv(ep, iov, desc, 2, FI_ADDR_UNSPEC, 7, 0, NULL), FI_EINVAL);

	cur_case = "length past max_msg_size / inject_size";
	if (f->info->ep_attr->max_msg_size < SIZE_MAX) {
		/* Lengths the call must refuse before reading a byte. */
		size_t big = f->info->ep_attr->max_msg_size + 1;

		ERR(fi_send(ep, f->lbuf, big, f->ldesc, d, NULL));
		ERR_IS(fi_tsend(ep, f->lbuf, big, f->ldesc, d, 7, NULL), FI_EINVAL,
		       FI_EMSGSIZE);
		ERR(fi_write(ep, f->lbuf, big, f->ldesc, d, f->tbase, f->tkey, NULL));
	}
	size_t inj = f->info->tx_attr->inject_size + 1;
	char *ibuf = calloc(1, inj);
	struct iovec i1 = {ibuf, inj};
	msg = (struct fi_msg){.msg_iov = &i1, .desc = desc, .iov_count = 1, .addr = d};
	ERR(fi_inject(ep, ibuf, inj, d));
	ERR(fi_injectdata(ep, ibuf, inj, 1, d));
	ERR_IS(fi_tinject(ep, ibuf, inj, d, 7), FI_EINVAL, FI_EMSGSIZE);
	ERR_IS(fi_tinjectdata(ep, ibuf, inj, 1, d, 7), FI_EINVAL, FI_EMSGSIZE);
	ERR(fi_sendmsg(ep, &msg, FI_INJECT));
	ERR(fi_inject_write(ep, ibuf, inj, d, f->tbase, f->tkey));
	ERR(fi_inject_writedata(ep, ibuf, inj, 1, d, f->tbase, f->tkey));
	free(ibuf);
	CHECK(target_untouched(f));
	free(iov);
	free(desc);
	free(ioc);
	free(riov);
	free(rai);
}

/* Flags no operation defines, and defined flags in combinations the calls
 * refuse. */
static void case_unknown_flags(struct fx *f)
{
	struct fid_ep *ep = f->ep[0];
	fi_addr_t d = f->addr[1];
	struct iovec iov = {f->lbuf, 16}, iov2[2] = {{f->lbuf, 8}, {f->lbuf + 1, 8}};
	void *desc[2] = {f->ldesc, f->ldesc};
	struct fi_msg msg = {.msg_iov = &iov, .desc = desc, .iov_count = 1, .addr = d};
	struct fi_msg_tagged tmsg = {
	    .msg_iov = &iov, .desc = desc, .iov_count = 1, .addr = d, .tag = 7};
	struct fi_rma_iov riov = {f->tbase, 16, f->tkey};
	struct fi_msg_rma rmsg = {.msg_iov = &iov,
	                          .desc = desc,
	                          .iov_count = 1,
	                          .addr = d,
	                          .rma_iov = &riov,
	                          .rma_iov_count = 1};
	struct fi_ioc ioc = {f->lbuf, 1}, rioc = {f->lbuf + 8, 1};
	struct fi_rma_ioc rai = {f->tbase, 1, f->tkey};
	struct fi_msg_atomic amsg = {.msg_iov = &ioc,
	                             .desc = desc,
	                             .iov_count = 1,
	                             .addr = d,
	                             .rma_iov = &rai,
	                             .rma_iov_count = 1,
	                             .datatype = FI_UINT64,
	                             .op = FI_SUM};

	for (int k = 0; k < 2; k++) {
		uint64_t fl = k ? UNKNOWN_FLAG2 : UNKNOWN_FLAG;

		cur_case = k ? "unknown flag 1<<40" : "unknown flag 1<<15";
		ERR(fi_sendmsg(ep, &msg, fl));
		ERR_IS(fi_tsendmsg(ep, &tmsg, fl), FI_EINVAL, FI_EBADFLAGS);
		ERR(fi_readmsg(ep, &rmsg, fl));
		ERR(fi_writemsg(ep, &rmsg, fl));
		ERR(fi_atomicmsg(ep, &amsg, fl));
		ERR(fi_fetch_atomicmsg(ep, &amsg, &rioc, desc, 1, fl));
		msg.addr = tmsg.addr = FI_ADDR_UNSPEC;
		ERR(fi_recvmsg(ep, &msg, fl));
		ERR_IS(fi_trecvmsg(ep, &tmsg, fl), FI_EINVAL, FI_EBADFLAGS);
		msg.addr = tmsg.addr = d;
		/* Default op flags set through fi_control: the same bits. */
		uint64_t opf = FI_TRANSMIT | fl;
		ERR(fi_control(&ep->fid, FI_SETOPSFLAG, &opf));
	}

	cur_case = "refused flag combinations";
	msg.addr = tmsg.addr = FI_ADDR_UNSPEC;
	/* FI_MULTI_RECV takes one buffer. */
	msg.msg_iov = iov2;
	msg.iov_count = 2;
	ERR(fi_recvmsg(ep, &msg, FI_MULTI_RECV));
	/* FI_DISCARD needs FI_PEEK or FI_CLAIM; FI_CLAIM a claimed message. */
	ERR_IS(fi_trecvmsg(ep, &tmsg, FI_DISCARD), FI_EINVAL);
	tmsg.context = (void *)&tmsg;
	ERR_IS(fi_trecvmsg(ep, &tmsg, FI_CLAIM), FI_EINVAL);
	/* FI_GETOPSFLAG / FI_SETOPSFLAG need exactly one of FI_TRANSMIT, FI_RECV. */
	uint64_t opf = 0;
	ERR(fi_control(&ep->fid, FI_GETOPSFLAG, &opf));
	opf = FI_TRANSMIT | FI_RECV;
	ERR(fi_control(&ep->fid, FI_GETOPSFLAG, &opf));
	opf = FI_TRANSMIT | FI_RECV | FI_COMPLETION;
	ERR(fi_control(&ep->fid, FI_SETOPSFLAG, &opf));
	ERR(fi_control(&ep->fid, FI_GETOPSFLAG, NULL));
	ERR(fi_control(&ep->fid, FI_SETOPSFLAG, NULL));
	CHECK(target_untouched(f));
}

/* Kind bits (FI_TAGGED, FI_MSG) in an untagged receive's flags do not
 * make it tagged: a multi-receive buffer directed at the endpoint itself
 * with FI_TAGGED in its flags takes an untagged message and reports
 * FI_MSG, and a tagged receive after it and the endpoint's close are
 * clean.  (The buffer was once unlinked from the tagged list: a use after
 * free the API fuzzer found, which the sanitizer build sees at close.) */
static void case_kind_flags(struct fx *f)
{
	struct fi_info *info = fi_dupinfo(f->info);
	struct fi_av_attr aa = {.type = FI_AV_TABLE};
	struct fid_av *av = NULL;
	struct fid_ep *ep = NULL;
	struct fid_cq *cq = open_cq(f->domain);
	char name[256], buf[64], tbuf[64];
	size_t len = sizeof(name);
	fi_addr_t self = FI_ADDR_NOTAVAIL;
	struct iovec iov = {buf, sizeof(buf)};
	struct fi_msg msg = {.msg_iov = &iov, .iov_count = 1};
	struct fi_cq_tagged_entry e = {0};
	bool got = false;

	cur_case = "kind bits in receive flags";
	if (!info || !cq)
		goto out;
	info->caps |= FI_MULTI_RECV;
	info->rx_attr->caps |= FI_MULTI_RECV;
	OK(fi_av_open(f->domain, &aa, &av, NULL));
	OK(fi_endpoint(f->domain, info, &ep, NULL));
	if (!av || !ep)
		goto out;
	OK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	OK(fi_ep_bind(ep, &av->fid, 0));
	OK(fi_enable(ep));
	OK(fi_getname(&ep->fid, name, &len));
	CHECK_INT(fi_av_insert(av, name, 1, &self, 0, NULL), 1);
	msg.addr = self;
	OK(fi_recvmsg(ep, &msg, FI_MULTI_RECV | FI_TAGGED));
	OK(fi_send(ep, buf, 0, NULL, self, NULL));
	for (int spin = 0; spin < 1000000 && !got; spin++)
		got = fi_cq_read(cq, &e, 1) == 1 && (e.flags & FI_RECV);
	CHECK(got);
	CHECK(e.flags & FI_MSG);
	CHECK(!(e.flags & FI_TAGGED));
	OK(fi_trecv(ep, tbuf, sizeof(tbuf), NULL, self, 1, 0, NULL));
out:
	if (ep)
		OK(fi_close(&ep->fid));
	if (av)
		OK(fi_close(&av->fid));
	if (cq)
		OK(fi_close(&cq->fid));
	fi_freeinfo(info);
}

/* A transmit context of an enabled scalable endpoint takes no operation
 * before it is enabled itself (nothing would progress or report it; the
 * API fuzzer found one accepted, and the context then refused to close),
 * and closes cleanly. */
static void case_txc_not_enabled(struct fx *f)
{
	struct fi_info *info = fi_dupinfo(f->info);
	struct fid_ep *sep = NULL, *tx[2] = {NULL, NULL}, *rx = NULL;
	struct fid_cq *cq = open_cq(f->domain);
	char b[8] = {0};

	cur_case = "transmit context not enabled";
	if (!info || !cq)
		goto out;
	info->ep_attr->tx_ctx_cnt = 2;
	info->ep_attr->rx_ctx_cnt = 1;
	OK(fi_scalable_ep(f->domain, info, &sep, NULL));
	if (!sep)
		goto out;
	OK(fi_scalable_ep_bind(sep, &f->av->fid, 0));
	for (int i = 0; i < 2; i++) {
		OK(fi_tx_context(sep, i, NULL, &tx[i], NULL));
		if (tx[i])
			OK(fi_ep_bind(tx[i], &cq->fid, FI_TRANSMIT));
	}
	OK(fi_rx_context(sep, 0, NULL, &rx, NULL));
	if (!tx[0] || !tx[1] || !rx)
		goto out;
	OK(fi_ep_bind(rx, &cq->fid, FI_RECV));
	OK(fi_enable(tx[0]));
	OK(fi_enable(rx));
	OK(fi_enable(sep));
	ERR_IS(fi_send(tx[1], b, sizeof(b), NULL, f->addr[1], NULL), FI_EOPBADSTATE);
	ERR_IS(fi_inject(tx[1], b, sizeof(b), f->addr[1]), FI_EOPBADSTATE);
	ERR_IS(fi_write(tx[1], b, sizeof(b), NULL, f->addr[1], f->tbase, f->tkey, NULL),
	       FI_EOPBADSTATE);
	ERR_IS(fi_atomic(tx[1], b, 1, NULL, f->addr[1], f->tbase, f->tkey, FI_UINT64,
	                 FI_SUM, NULL),
	       FI_EOPBADSTATE);
out:
	for (int i = 0; i < 2; i++)
		if (tx[i])
			OK(fi_close(&tx[i]->fid));
	if (rx)
		OK(fi_close(&rx->fid));
	if (sep)
		OK(fi_close(&sep->fid));
	if (cq)
		OK(fi_close(&cq->fid));
	fi_freeinfo(info);
}

/* An endpoint bound to a shared receive context, not enabled and with no
 * AV: a receive posted through it names no source it could check (the
 * context has no enabled endpoint to speak for it): -FI_EINVAL, where it
 * once read the missing AV.  One from any source is taken, as the
 * context's own fid takes it. */
static void case_srx_not_enabled(struct fx *f)
{
	struct fi_info *info = fi_dupinfo(f->info);
	struct fi_rx_attr ra;
	struct fid_ep *srx = NULL, *ep = NULL;
	char b[8] = {0};

	cur_case = "shared receive context, endpoint not enabled";
	if (!info)
		return;
	ra = *info->rx_attr;
	ra.caps |= FI_DIRECTED_RECV;
	OK(fi_srx_context(f->domain, &ra, &srx, NULL));
	info->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	OK(fi_endpoint(f->domain, info, &ep, NULL));
	if (!srx || !ep)
		goto out;
	OK(fi_ep_bind(ep, &srx->fid, 0));
	ERR_IS(fi_recv(ep, b, sizeof(b), NULL, f->addr[1], NULL), FI_EINVAL);
	ERR_IS(fi_trecv(ep, b, sizeof(b), NULL, f->addr[1], 1, 0, NULL), FI_EINVAL);
	OK(fi_recv(ep, b, sizeof(b), NULL, FI_ADDR_UNSPEC, NULL));
out:
	if (ep)
		OK(fi_close(&ep->fid));
	if (srx)
		OK(fi_close(&srx->fid));
	fi_freeinfo(info);
}

/* A triggered receive through a shared receive context's own fid: held
 * receives are an endpoint's (they are issued through it), so the
 * context refuses them with -FI_EOPNOTSUPP and holds nothing. */
static void case_srx_triggered(struct fx *f)
{
	struct fi_rx_attr ra = *f->info->rx_attr;
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fid_ep *srx = NULL;
	struct fid_cntr *cntr = NULL;
	char b[8] = {0};
	struct iovec iov = {b, sizeof(b)};
	struct fi_triggered_context t = {.event_type = FI_TRIGGER_THRESHOLD};
	struct fi_msg msg = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC,
	                     .context = &t};
	struct fi_msg_tagged tmsg = {.msg_iov = &iov, .iov_count = 1,
	                             .addr = FI_ADDR_UNSPEC, .tag = 1, .context = &t};

	cur_case = "triggered receive on a shared receive context";
	OK(fi_srx_context(f->domain, &ra, &srx, NULL));
	OK(fi_cntr_open(f->domain, &ca, &cntr, NULL));
	if (!srx || !cntr)
		goto out;
	t.trigger.threshold.cntr = cntr;
	t.trigger.threshold.threshold = 1;
	ERR_IS(fi_recvmsg(srx, &msg, FI_TRIGGER), FI_EOPNOTSUPP);
	ERR_IS(fi_trecvmsg(srx, &tmsg, FI_TRIGGER), FI_EOPNOTSUPP);
	OK(fi_cntr_add(cntr, 1)); /* nothing was held to fire */
out:
	if (srx)
		OK(fi_close(&srx->fid));
	if (cntr)
		OK(fi_close(&cntr->fid));
}

/* A bound endpoint not enabled: every data call -FI_EOPBADSTATE
 * (fi_endpoint(3)); an endpoint missing its AV or a CQ does not enable
 * (-FI_ENOCQ for the CQ) and stays unusable. */
static void case_before_enable(struct fx *f)
{
	struct fid_ep *ep = fresh_ep(f);
	struct fid_cq *cq = open_cq(f->domain);
	int ret;

	if (!ep || !cq)
		return;
	/* Not bound at all. */
	all_tx_calls(f, ep, f->addr[1], FI_EOPBADSTATE, FI_EOPBADSTATE,
	             "unbound endpoint, not enabled");
	all_rx_calls(f, ep, FI_ADDR_UNSPEC, FI_EOPBADSTATE,
	             "unbound endpoint, not enabled");
	cur_case = "enable without CQ or AV";
	ERR(fi_enable(ep));
	/* An AV but no CQ. */
	OK(fi_ep_bind(ep, &f->av->fid, 0));
	cur_case = "enable without CQ";
	ERR_IS(fi_enable(ep), FI_ENOCQ);
	/* A transmit CQ but no receive CQ, though the endpoint receives. */
	OK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT));
	cur_case = "enable without receive CQ";
	ret = fi_enable(ep);
	ERR_IS(ret, FI_ENOCQ);
	if (ret) { /* else reported once above, not for every call */
		all_tx_calls(f, ep, f->addr[1], FI_EOPBADSTATE, FI_EOPBADSTATE,
		             "endpoint without receive CQ");
		all_rx_calls(f, ep, FI_ADDR_UNSPEC, FI_EOPBADSTATE,
		             "endpoint without receive CQ");
	}
	OK(fi_close(&ep->fid));

	/* CQs but no AV. */
	ep = fresh_ep(f);
	if (!ep)
		return;
	OK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	cur_case = "enable without AV";
	ret = fi_enable(ep);
	ERR(ret);
	if (ret) {
		all_tx_calls(f, ep, f->addr[1], FI_EOPBADSTATE, FI_EOPBADSTATE,
		             "endpoint without AV");
		all_rx_calls(f, ep, FI_ADDR_UNSPEC, FI_EOPBADSTATE,
		             "endpoint without AV");
	}
	OK(fi_close(&ep->fid));
	OK(fi_close(&cq->fid));
	CHECK(target_untouched(f));
}

/* fi_ep_bind with what cannot be bound, or how. */
static void case_bad_bind(struct fx *f)
{
	struct fid_ep *ep = fresh_ep(f);
	struct fid_cq *cq = open_cq(f->domain), *cq2 = open_cq(f->domain);
	struct fid_domain *dom2 = NULL;
	struct fid_cq *ocq = NULL;
	struct fid_av *av2 = NULL;
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cntr_attr cntr_attr = {.events = FI_CNTR_EVENTS_COMP};
	struct fid_cntr *cntr = NULL;

	if (!ep || !cq || !cq2)
		return;
	cur_case = "fi_ep_bind";
	ERR(fi_ep_bind(ep, NULL, FI_TRANSMIT));
	ERR(fi_ep_bind(ep, &f->domain->fid, 0));
	ERR(fi_ep_bind(ep, &f->fabric->fid, 0));
	ERR(fi_ep_bind(ep, &f->lmr->fid, 0));
	ERR(fi_ep_bind(ep, &f->ep[1]->fid, 0));
	ERR(fi_ep_bind(ep, &ep->fid, 0));
	ERR(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | UNKNOWN_FLAG));
	ERR(fi_ep_bind(ep, &cq->fid, UNKNOWN_FLAG));
	ERR(fi_ep_bind(ep, &f->av->fid, UNKNOWN_FLAG));
	/* A counter bound for no event. */
	OK(fi_cntr_open(f->domain, &cntr_attr, &cntr, NULL));
	if (cntr)
		ERR(fi_ep_bind(ep, &cntr->fid, UNKNOWN_FLAG));
	/* A second CQ for a direction that has one, a second AV. */
	OK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	ERR(fi_ep_bind(ep, &cq2->fid, FI_TRANSMIT));
	ERR(fi_ep_bind(ep, &cq2->fid, FI_RECV));
	OK(fi_ep_bind(ep, &f->av->fid, 0));
	OK(fi_av_open(f->domain, &av_attr, &av2, NULL));
	if (av2)
		ERR(fi_ep_bind(ep, &av2->fid, 0));
	/* Objects of another domain (fi_endpoint(3): -FI_EDOMAIN). */
	OK(fi_domain(f->fabric, f->info, &dom2, NULL));
	if (dom2) {
		ocq = open_cq(dom2);
		if (ocq) {
			struct fid_ep *ep2 = fresh_ep(f);

			ERR_IS(fi_ep_bind(ep2, &ocq->fid, FI_TRANSMIT | FI_RECV),
			       FI_EDOMAIN, FI_EINVAL);
			OK(fi_close(&ep2->fid));
		}
	}
	/* After fi_enable, nothing more binds. */
	OK(fi_enable(ep));
	cur_case = "fi_ep_bind after enable";
	if (cntr)
		ERR(fi_ep_bind(ep, &cntr->fid, FI_SEND));
	ERR(fi_ep_bind(f->ep[0], &cq2->fid, FI_TRANSMIT));
	OK(fi_close(&ep->fid));
	if (ocq)
		OK(fi_close(&ocq->fid));
	if (dom2)
		OK(fi_close(&dom2->fid));
	if (av2)
		OK(fi_close(&av2->fid));
	if (cntr)
		OK(fi_close(&cntr->fid));
	OK(fi_close(&cq->fid));
	OK(fi_close(&cq2->fid));
}

/* Closing an object that still has bound or opened children is -FI_EBUSY
 * and leaves it working. */
static void case_close_busy(struct fx *f)
{
	struct fi_cntr_attr cntr_attr = {.events = FI_CNTR_EVENTS_COMP};
	struct fi_eq_attr eq_attr = {.size = 16, .wait_obj = FI_WAIT_NONE};
	struct fi_av_attr ev_attr = {.type = FI_AV_TABLE, .flags = FI_EVENT};
	struct fi_cq_tagged_entry e;
	struct fid_cntr *cntr = NULL;
	struct fid_eq *eq = NULL;
	struct fid_av *eav = NULL;
	struct fid_ep *ep = fresh_ep(f);

	cur_case = "close with children";
	ERR_IS(fi_close(&f->fabric->fid), FI_EBUSY);
	ERR_IS(fi_close(&f->domain->fid), FI_EBUSY);
	ERR_IS(fi_close(&f->av->fid), FI_EBUSY);
	ERR_IS(fi_close(&f->cq[0]->fid), FI_EBUSY);
	ERR_IS(fi_close(&f->cq[1]->fid), FI_EBUSY);
	/* A counter bound to an endpoint. */
	OK(fi_cntr_open(f->domain, &cntr_attr, &cntr, NULL));
	if (cntr && ep) {
		OK(fi_ep_bind(ep, &cntr->fid, FI_SEND | FI_RECV));
		ERR_IS(fi_close(&cntr->fid), FI_EBUSY);
	}
	/* An EQ bound to an AV; an EQ open on the fabric. */
	OK(fi_eq_open(f->fabric, &eq_attr, &eq, NULL));
	OK(fi_av_open(f->domain, &ev_attr, &eav, NULL));
	if (eq && eav) {
		OK(fi_av_bind(eav, &eq->fid, 0));
		ERR_IS(fi_close(&eq->fid), FI_EBUSY);
	}
	/* The domain with only a memory region left in it. */
	struct fid_domain *dom2 = NULL;
	struct fid_mr *mr2 = NULL;
	OK(fi_domain(f->fabric, f->info, &dom2, NULL));
	if (dom2) {
		OK(fi_mr_reg(dom2, f->lbuf, 64, FI_SEND, 0, 3, 0, &mr2, NULL));
		ERR_IS(fi_close(&dom2->fid), FI_EBUSY);
		if (mr2)
			OK(fi_close(&mr2->fid));
		OK(fi_close(&dom2->fid));
	}
	/* Everything still works: a message from A to B and its completions. */
	cur_case = "objects after -FI_EBUSY";
	ERR_IS(fi_cq_read(f->cq[0], &e, 1), FI_EAGAIN);
	OK(fi_recv(f->ep[1], f->tbuf, 16, NULL, FI_ADDR_UNSPEC, NULL));
	OK(fi_send(f->ep[0], f->lbuf, 16, f->ldesc, f->addr[1], NULL));
	int got = 0;
	for (uint64_t end = now_ms() + 3000; got < 2 && now_ms() < end;) {
		for (int i = 0; i < 2; i++)
			if (fi_cq_read(f->cq[i], &e, 1) == 1)
				got++;
	}
	CHECK_INT(got, 2);
	memset(f->tbuf, PAT_T, BUFSZ);
	/* Children closed first, then the parents close. */
	if (ep)
		OK(fi_close(&ep->fid));
	if (eav)
		OK(fi_close(&eav->fid));
	if (eq)
		OK(fi_close(&eq->fid));
	if (cntr)
		OK(fi_close(&cntr->fid));
}

/* RMA and atomics with keys the target never issued, a key for other
 * access, an address past the region, a key of a closed region. */
static void case_bad_keys(struct fx *f)
{
	struct fid_ep *ep = f->ep[0];
	fi_addr_t d = f->addr[1];
	uint64_t *res = f->lbuf + 8, *cmp = f->lbuf + 16;
	uint64_t bad = f->tkey ^ 0x5a5a5a5a5a5aULL;
	struct fid_mr *romr = NULL, *gone = NULL;

	cur_case = "unknown key";
	ASYNC_FAIL(fi_write(ep, f->lbuf, 16, f->ldesc, d, f->tbase, bad, NULL));
	ASYNC_FAIL(fi_read(ep, f->lbuf, 16, f->ldesc, d, f->tbase, bad, NULL));
	ASYNC_FAIL(fi_atomic(ep, f->lbuf, 1, f->ldesc, d, f->tbase, bad, FI_UINT64,
	                     FI_SUM, NULL));
	ASYNC_FAIL(fi_fetch_atomic(ep, f->lbuf, 1, f->ldesc, res, f->ldesc, d, f->tbase,
	                           bad, FI_UINT64, FI_SUM, NULL));
	ASYNC_FAIL(fi_compare_atomic(ep, f->lbuf, 1, f->ldesc, cmp, f->ldesc, res,
	                             f->ldesc, d, f->tbase, bad, FI_UINT64, FI_CSWAP,
	                             NULL));
	cur_case = "address past the region";
	ASYNC_FAIL(
	    fi_write(ep, f->lbuf, 16, f->ldesc, d, f->tbase + BUFSZ - 8, f->tkey, NULL));
	ASYNC_FAIL(
	    fi_read(ep, f->lbuf, 16, f->ldesc, d, f->tbase + BUFSZ, f->tkey, NULL));
	ASYNC_FAIL(fi_atomic(ep, f->lbuf, 1, f->ldesc, d, f->tbase + BUFSZ, f->tkey,
	                     FI_UINT64, FI_SUM, NULL));
	ASYNC_FAIL(fi_write(ep, f->lbuf, 16, f->ldesc, d, f->tbase - 8, f->tkey, NULL));
	ASYNC_FAIL(fi_write(ep, f->lbuf, 16, f->ldesc, d, f->tbase + (UINT64_MAX - 7),
	                    f->tkey, NULL));

	/* A region the target may only read from. */
	cur_case = "key without the access";
	OK(fi_mr_reg(f->domain, f->tbuf, BUFSZ, FI_REMOTE_READ, 0, 4, 0, &romr, NULL));
	if (romr) {
		uint64_t k = fi_mr_key(romr);

		ASYNC_FAIL(fi_write(ep, f->lbuf, 16, f->ldesc, d, f->tbase, k, NULL));
		ASYNC_FAIL(fi_atomic(ep, f->lbuf, 1, f->ldesc, d, f->tbase, k, FI_UINT64,
		                     FI_SUM, NULL));
		OK(fi_close(&romr->fid));
	}
	/* A region closed: its key is gone. */
	cur_case = "key of a closed region";
	OK(fi_mr_reg(f->domain, f->tbuf, BUFSZ, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 5, 0,
	             &gone, NULL));
	if (gone) {
		uint64_t k = fi_mr_key(gone);

		OK(fi_close(&gone->fid));
		if (k != f->tkey)
			ASYNC_FAIL(
			    fi_write(ep, f->lbuf, 16, f->ldesc, d, f->tbase, k, NULL));
	}
}

/* Datatypes and ops out of range, or of the wrong class for the call. */
static void case_bad_atomic(struct fx *f)
{
	struct fid_ep *ep = f->ep[0];
	fi_addr_t d = f->addr[1];
	uint64_t *res = f->lbuf + 8, *cmp = f->lbuf + 16;
	const int dts[] = {FI_UINT128 + 1, FI_VOID, 1000, -1};
	const int ops[] = {FI_ATOMIC_OP_LAST, FI_NOOP, 1000, -1};
	size_t count;
	struct fi_atomic_attr aattr;

	cur_case = "bad datatype";
	for (size_t i = 0; i < sizeof(dts) / sizeof(dts[0]); i++) {
		enum fi_datatype dt = (enum fi_datatype)dts[i];

		ERR_IS(fi_atomic(ep, f->lbuf, 1, f->ldesc, d, f->tbase, f->tkey, dt,
		                 FI_SUM, NULL),
		       FI_EOPNOTSUPP, FI_EINVAL);
		ERR_IS(fi_inject_atomic(ep, f->lbuf, 1, d, f->tbase, f->tkey, dt, FI_SUM),
		       FI_EOPNOTSUPP, FI_EINVAL);
		ERR_IS(fi_fetch_atomic(ep, f->lbuf, 1, f->ldesc, res, f->ldesc, d,
		                       f->tbase, f->tkey, dt, FI_SUM, NULL),
		       FI_EOPNOTSUPP, FI_EINVAL);
		ERR_IS(fi_compare_atomic(ep, f->lbuf, 1, f->ldesc, cmp, f->ldesc, res,
		                         f->ldesc, d, f->tbase, f->tkey, dt, FI_CSWAP,
		                         NULL),
		       FI_EOPNOTSUPP, FI_EINVAL);
		ERR(fi_atomicvalid(ep, dt, FI_SUM, &count));
		ERR(fi_fetch_atomicvalid(ep, dt, FI_SUM, &count));
		ERR(fi_compare_atomicvalid(ep, dt, FI_CSWAP, &count));
		ERR(fi_query_atomic(f->domain, dt, FI_SUM, &aattr, 0));
	}
	cur_case = "bad op";
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		enum fi_op op = (enum fi_op)ops[i];

		ERR_IS(fi_atomic(ep, f->lbuf, 1, f->ldesc, d, f->tbase, f->tkey,
		                 FI_UINT64, op, NULL),
		       FI_EOPNOTSUPP, FI_EINVAL);
		ERR_IS(
		    fi_inject_atomic(ep, f->lbuf, 1, d, f->tbase, f->tkey, FI_UINT64, op),
		    FI_EOPNOTSUPP, FI_EINVAL);
		ERR_IS(fi_fetch_atomic(ep, f->lbuf, 1, f->ldesc, res, f->ldesc, d,
		                       f->tbase, f->tkey, FI_UINT64, op, NULL),
		       FI_EOPNOTSUPP, FI_EINVAL);
		ERR_IS(fi_compare_atomic(ep, f->lbuf, 1, f->ldesc, cmp, f->ldesc, res,
		                         f->ldesc, d, f->tbase, f->tkey, FI_UINT64, op,
		                         NULL),
		       FI_EOPNOTSUPP, FI_EINVAL);
		ERR(fi_atomicvalid(ep, FI_UINT64, op, &count));
		ERR(fi_query_atomic(f->domain, FI_UINT64, op, &aattr, 0));
	}
	cur_case = "op of the wrong call";
	/* Compare ops through the base and fetch calls, base ops through
	 * the compare call; FI_ATOMIC_READ has nothing to write. */
	ERR_IS(fi_atomic(ep, f->lbuf, 1, f->ldesc, d, f->tbase, f->tkey, FI_UINT64,
	                 FI_CSWAP, NULL),
	       FI_EOPNOTSUPP, FI_EINVAL);
	ERR_IS(fi_fetch_atomic(ep, f->lbuf, 1, f->ldesc, res, f->ldesc, d, f->tbase,
	                       f->tkey, FI_UINT64, FI_MSWAP, NULL),
	       FI_EOPNOTSUPP, FI_EINVAL);
	ERR_IS(fi_compare_atomic(ep, f->lbuf, 1, f->ldesc, cmp, f->ldesc, res, f->ldesc,
	                         d, f->tbase, f->tkey, FI_UINT64, FI_SUM, NULL),
	       FI_EOPNOTSUPP, FI_EINVAL);
	ERR_IS(fi_atomic(ep, f->lbuf, 1, f->ldesc, d, f->tbase, f->tkey, FI_UINT64,
	                 FI_ATOMIC_READ, NULL),
	       FI_EOPNOTSUPP, FI_EINVAL);
	ERR(fi_atomicvalid(ep, FI_UINT64, FI_CSWAP, &count));
	ERR(fi_compare_atomicvalid(ep, FI_UINT64, FI_SUM, &count));
	ERR(fi_query_atomic(f->domain, FI_UINT64, FI_SUM, &aattr, UNKNOWN_FLAG));
	/* Bitwise ops on floating point. */
	ERR_IS(fi_atomic(ep, f->lbuf, 1, f->ldesc, d, f->tbase, f->tkey, FI_DOUBLE,
	                 FI_BOR, NULL),
	       FI_EOPNOTSUPP, FI_EINVAL);
	ERR(fi_atomicvalid(ep, FI_DOUBLE, FI_BXOR, &count));

	/* More elements than one call may carry (fi_atomic(3): -FI_EMSGSIZE). */
	cur_case = "count past fi_atomicvalid's";
	count = 0;
	OK(fi_atomicvalid(ep, FI_UINT64, FI_SUM, &count));
	if (count && count < (1u << 20)) {
		uint64_t *big = calloc(count + 1, 8), *bres = calloc(count + 1, 8);

		ERR_IS(fi_atomic(ep, big, count + 1, NULL, d, f->tbase, f->tkey,
		                 FI_UINT64, FI_SUM, NULL),
		       FI_EMSGSIZE);
		ERR_IS(fi_fetch_atomic(ep, big, count + 1, NULL, bres, NULL, d, f->tbase,
		                       f->tkey, FI_UINT64, FI_SUM, NULL),
		       FI_EMSGSIZE);
		ERR_IS(fi_inject_atomic(ep, big, count + 1, d, f->tbase, f->tkey,
		                        FI_UINT64, FI_SUM),
		       FI_EMSGSIZE);
		free(big);
		free(bres);
	}
	CHECK(target_untouched(f));
}

/* Bad attributes and arguments at open: CQ, counter, EQ, AV, wait set. */
static void case_bad_open_attrs(struct fx *f)
{
	struct fid_cq *cq = NULL;
	struct fid_cntr *cntr = NULL;
	struct fid_eq *eq = NULL;
	struct fid_av *av = NULL;
	struct fid_wait *wait = NULL;

	cur_case = "fi_cq_open";
	{
		struct fi_cq_attr a[] = {
		    {.format = (enum fi_cq_format)99},
		    {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = (enum fi_wait_obj)99},
		    {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_SET},
		    {.format = FI_CQ_FORMAT_TAGGED, .flags = UNKNOWN_FLAG},
		    {.format = FI_CQ_FORMAT_TAGGED,
		     .wait_obj = FI_WAIT_UNSPEC,
		     .wait_cond = (enum fi_cq_wait_cond)99},
		    {.format = FI_CQ_FORMAT_TAGGED, .size = SIZE_MAX},
		    {.format = FI_CQ_FORMAT_TAGGED, .size = SIZE_MAX / 8 + 1},
		};
		for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); i++) {
			cq = NULL;
			ERR(fi_cq_open(f->domain, &a[i], &cq, NULL));
			if (cq) {
				fprintf(stderr, "  (fi_cq_open attr %zu opened a CQ)\n",
				        i);
				fi_close(&cq->fid);
			}
		}
	}
	cur_case = "fi_cntr_open";
	{
		struct fi_cntr_attr a[] = {
		    {.events = (enum fi_cntr_events)99},
		    {.events = FI_CNTR_EVENTS_COMP, .wait_obj = (enum fi_wait_obj)99},
		    {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_SET},
		    {.events = FI_CNTR_EVENTS_COMP, .flags = UNKNOWN_FLAG},
		};
		for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); i++) {
			cntr = NULL;
			ERR(fi_cntr_open(f->domain, &a[i], &cntr, NULL));
			if (cntr)
				fi_close(&cntr->fid);
		}
	}
	cur_case = "fi_eq_open";
	{
		struct fi_eq_attr a[] = {
		    {.wait_obj = (enum fi_wait_obj)99},
		    {.wait_obj = FI_WAIT_SET},
		    {.wait_obj = FI_WAIT_NONE, .flags = UNKNOWN_FLAG},
		};
		for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); i++) {
			eq = NULL;
			ERR(fi_eq_open(f->fabric, &a[i], &eq, NULL));
			if (eq)
				fprintf(stderr, "  (fi_eq_open attr %zu opened an EQ)\n",
				        i);
			if (eq)
				fi_close(&eq->fid);
		}
	}
	cur_case = "fi_av_open";
	{
		struct fi_av_attr a[] = {
		    {.type = (enum fi_av_type)99},
		    {.type = FI_AV_TABLE, .rx_ctx_bits = 65},
		    {.type = FI_AV_TABLE, .flags = UNKNOWN_FLAG},
		    /* Open an existing shared AV, but no name. */
		    {.type = FI_AV_TABLE, .flags = FI_READ},
		};
		for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); i++) {
			av = NULL;
			ERR(fi_av_open(f->domain, &a[i], &av, NULL));
			if (av)
				fi_close(&av->fid);
		}
	}
	cur_case = "fi_wait_open";
	{
		struct fi_wait_attr a[] = {
		    {.wait_obj = (enum fi_wait_obj)99},
		    {.wait_obj = FI_WAIT_FD, .flags = UNKNOWN_FLAG},
		    {.wait_obj = FI_WAIT_SET},
		};
		for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); i++) {
			wait = NULL;
			ERR(fi_wait_open(f->fabric, &a[i], &wait));
			if (wait)
				fi_close(&wait->fid);
		}
	}
	/* Queues deeper than fi_getinfo offers: refused (a transmit queue
	 * of SIZE_MAX once had fi_endpoint loop over it, freeing); so is a
	 * source address that cannot be one (text without its NUL, a
	 * sockaddr of AF_UNIX), and what was made for it is freed (the
	 * sanitizer builds check). */
	cur_case = "fi_endpoint sizes";
	for (int i = 0; i < 6; i++) {
		struct fi_info *info = fi_dupinfo(f->info);
		struct fid_ep *ep = NULL;

		if (!info)
			continue;
		if (i == 0)
			info->tx_attr->size = SIZE_MAX;
		else if (i == 1)
			info->rx_attr->size = SIZE_MAX;
		else if (i == 2)
			info->tx_attr->size = f->info->tx_attr->size + 1;
		else if (i == 3)
			info->tx_attr->inject_size = SIZE_MAX;
		else if (i == 4)
			info->rx_attr->total_buffered_recv = SIZE_MAX;
		else {
			struct sockaddr_storage un = {.ss_family = AF_UNIX};

			free(info->src_addr);
			info->src_addr = calloc(1, sizeof(un));
			if (!info->src_addr) {
				fi_freeinfo(info);
				continue;
			}
			if (info->addr_format == FI_ADDR_STR) {
				memcpy(info->src_addr, "fi_", 3); /* no NUL */
				info->src_addrlen = 3;
			} else {
				memcpy(info->src_addr, &un, sizeof(un));
				info->src_addrlen = f->info->src_addrlen ? f->info->src_addrlen
				                                         : sizeof(struct sockaddr_in);
			}
		}
		ERR(fi_endpoint(f->domain, info, &ep, NULL));
		if (ep)
			fi_close(&ep->fid);
		fi_freeinfo(info);
	}
}

/* fi_mr_reg and friends: access rights and flags not defined, NULL and
 * wrapping ranges, too many iovs, a requested key in use. */
static void case_bad_mr(struct fx *f)
{
	struct fid_mr *mr = NULL, *mr2 = NULL;
	struct fid_domain *d = f->domain;
	size_t n = f->info->domain_attr->mr_iov_limit + 1;
	struct iovec *iov = calloc(n, sizeof(*iov));

#define NO_MR(call)                                                                      \
	do {                                                                             \
		mr = NULL;                                                               \
		ERR(call);                                                               \
		if (mr)                                                                  \
			fi_close(&mr->fid);                                              \
	} while (0)
	cur_case = "fi_mr_reg access";
	NO_MR(fi_mr_reg(d, f->lbuf, 64, UNKNOWN_FLAG, 0, 10, 0, &mr, NULL));
	NO_MR(fi_mr_reg(d, f->lbuf, 64, FI_SEND | UNKNOWN_FLAG2, 0, 11, 0, &mr, NULL));
	NO_MR(fi_mr_reg(d, f->lbuf, 64, FI_MSG, 0, 12, 0, &mr, NULL));
	cur_case = "fi_mr_reg flags";
	mr = NULL;
	ERR_IS(fi_mr_reg(d, f->lbuf, 64, FI_SEND, 0, 13, UNKNOWN_FLAG, &mr, NULL),
	       FI_EBADFLAGS);
	if (mr)
		fi_close(&mr->fid);
	cur_case = "fi_mr_reg ranges";
	NO_MR(fi_mr_reg(d, NULL, 4096, FI_REMOTE_WRITE, 0, 14, 0, &mr, NULL));
	NO_MR(fi_mr_reg(d, f->lbuf, SIZE_MAX, FI_REMOTE_WRITE, 0, 15, 0, &mr, NULL));
	NO_MR(fi_mr_reg(d, (char *)f->lbuf + 64, SIZE_MAX - 32, FI_REMOTE_WRITE, 0, 16, 0,
	                &mr, NULL));
	cur_case = "fi_mr_regv";
	for (size_t i = 0; i < n; i++)
		iov[i] = (struct iovec){f->lbuf + i, 8};
	NO_MR(fi_mr_regv(d, iov, n, FI_REMOTE_WRITE, 0, 17, 0, &mr, NULL));
	NO_MR(fi_mr_regv(d, NULL, 1, FI_REMOTE_WRITE, 0, 18, 0, &mr, NULL));
	iov[0] = (struct iovec){NULL, 64};
	NO_MR(fi_mr_regv(d, iov, 1, FI_REMOTE_WRITE, 0, 19, 0, &mr, NULL));
	cur_case = "fi_mr_regattr";
	NO_MR(fi_mr_regattr(d, NULL, 0, &mr));
	{
		struct iovec one = {f->lbuf, 64};
		struct fi_mr_attr a = {.mr_iov = &one,
		                       .iov_count = 1,
		                       .access = FI_REMOTE_WRITE,
		                       .requested_key = 20,
		                       .iface = FI_HMEM_SYSTEM};

		/* (iface is ignored without FI_HMEM, man fi_mr says: not
		 * misuse.) */
		a.iov_count = n;
		a.mr_iov = iov;
		NO_MR(fi_mr_regattr(d, &a, 0, &mr));
		a.iov_count = 1;
		a.mr_iov = &one;
		a.access = UNKNOWN_FLAG;
		NO_MR(fi_mr_regattr(d, &a, 0, &mr));
	}
	/* A requested key twice where the application picks keys
	 * (fi_mr(3): -FI_ENOKEY). */
	if (!(f->info->domain_attr->mr_mode & FI_MR_PROV_KEY)) {
		cur_case = "fi_mr_reg key in use";
		mr = NULL;
		ERR_IS(fi_mr_reg(d, f->lbuf, 64, FI_REMOTE_WRITE, 0, 2, 0, &mr, NULL),
		       FI_ENOKEY);
		if (mr)
			fi_close(&mr->fid);
	}
	/* The raw key into no room (fi_mr(3): -FI_ETOOSMALL), unless raw
	 * keys are not offered at all. */
	cur_case = "fi_mr_raw_attr";
	{
		uint64_t base;
		uint8_t raw[1];
		size_t ks = 0;

		ERR_IS(fi_mr_raw_attr(f->tmr, &base, raw, &ks, 0), FI_ETOOSMALL,
		       FI_ENOSYS);
		ks = 0;
		ERR(fi_mr_raw_attr(f->tmr, &base, raw, &ks, UNKNOWN_FLAG));
		ks = 1;
		ERR(fi_mr_map_raw(d, base, NULL, 8, &ks, 0));
	}
	/* fi_mr_bind: only a counter (or an endpoint where FI_MR_ENDPOINT),
	 * and known flags. */
	cur_case = "fi_mr_bind";
	OK(fi_mr_reg(d, f->lbuf, 64, FI_REMOTE_WRITE, 0, 21, 0, &mr2, NULL));
	if (mr2) {
		ERR(fi_mr_bind(mr2, &f->cq[0]->fid, 0));
		ERR(fi_mr_bind(mr2, &f->domain->fid, 0));
		ERR(fi_mr_bind(mr2, NULL, 0));
		ERR(fi_mr_bind(mr2, &f->ep[0]->fid, UNKNOWN_FLAG));
		ERR(fi_control(&mr2->fid, 999, NULL));
		OK(fi_close(&mr2->fid));
	}
	free(iov);
#undef NO_MR
}

/* fi_av_insert and friends with addresses that are not addresses. */
static void case_bad_av(struct fx *f)
{
	struct fid_av *av = f->av;
	fi_addr_t fa = 0;
	char junk[256];
	struct fi_av_attr ev_attr = {.type = FI_AV_TABLE, .flags = FI_EVENT};
	struct fid_av *eav = NULL;
	int ret;

	cur_case = "fi_av_insert bad addresses";
	/* Bytes of no valid address: 0xff (family 0xffff for sockaddrs), a
	 * family of another kind; on FI_ADDR_STR domains (strings packed one
	 * after another, as libfabric reads them) text of no known scheme,
	 * 0xff text, a scheme with garbage after it. */
	memset(junk, 0xff, sizeof(junk));
	junk[sizeof(junk) - 1] = '\0';
	if (f->info->addr_format == FI_ADDR_STR) {
		char packed[64];
		const char *strs[] = {"", junk, "no-such-scheme://not/an/address"};

		/* shm takes any other text as a name an endpoint may choose
		 * (tests/shm/named.c): only the empty one is refused there. */
		for (size_t i = 0; i < 1; i++) {
			fa = 0;
			ret = fi_av_insert(av, strs[i], 1, &fa, 0, NULL);
			check_count++;
			if (ret > 0 || fa != FI_ADDR_NOTAVAIL) {
				fprintf(stderr,
				        "[%s %s] string %zu: fi_av_insert = %d, fi_addr "
				        "%llu\n",
				        cur_prov, cur_case, i, ret,
				        (unsigned long long)fa);
				check_failures++;
			}
		}
		for (size_t i = 1; i < sizeof(strs) / sizeof(strs[0]); i++)
			(void)fi_av_insert(av, strs[i], 1, &fa, 0, NULL);
		snprintf(packed, sizeof(packed), "fi_shm://\xff\xff/zz");
		(void)fi_av_insert(av, packed, 1, &fa, 0, NULL);
		/* Any other text is a name, as on libfabric's shm: "hello"
		 * crashed when the buffer was read as an array of pointers.
		 * Packed beside an empty string, the names still go in. */
		{
			static const char three[] = "hello\0\0world";
			fi_addr_t fa3[3] = {0, 0, 0};
			int se[3] = {-1, -1, -1};

			fa = FI_ADDR_NOTAVAIL;
			ret = fi_av_insert(av, "hello", 1, &fa, 0, NULL);
			check_count++;
			if (ret != 1 || fa == FI_ADDR_NOTAVAIL) {
				fprintf(stderr, "[%s %s] \"hello\": fi_av_insert = %d\n",
				        cur_prov, cur_case, ret);
				check_failures++;
			}
			ret = fi_av_insert(av, three, 3, fa3, FI_SYNC_ERR, se);
			check_count++;
			if (ret != 2 || se[0] || se[1] != FI_EINVAL || se[2] ||
			    fa3[0] == FI_ADDR_NOTAVAIL || fa3[1] != FI_ADDR_NOTAVAIL ||
			    fa3[2] == FI_ADDR_NOTAVAIL) {
				fprintf(stderr,
				        "[%s %s] \"hello\", \"\", \"world\" packed: "
				        "fi_av_insert = %d, errors %d %d %d\n",
				        cur_prov, cur_case, ret, se[0], se[1], se[2]);
				check_failures++;
			}
		}
	} else {
		struct sockaddr_storage ss;

		fa = 0;
		ret = fi_av_insert(av, junk, 1, &fa, 0, NULL);
		check_count++;
		if (ret > 0 || fa != FI_ADDR_NOTAVAIL) {
			fprintf(stderr,
			        "[%s %s] 0xff bytes: fi_av_insert = %d, fi_addr %llu\n",
			        cur_prov, cur_case, ret, (unsigned long long)fa);
			check_failures++;
		}
		memset(&ss, 0, sizeof(ss));
		ss.ss_family = AF_UNIX;
		memcpy(junk, &ss, sizeof(ss));
		fa = 0;
		ret = fi_av_insert(av, junk, 1, &fa, 0, NULL);
		check_count++;
		if (ret > 0 || fa != FI_ADDR_NOTAVAIL) {
			fprintf(stderr,
			        "[%s %s] AF_UNIX: fi_av_insert = %d, fi_addr %llu\n",
			        cur_prov, cur_case, ret, (unsigned long long)fa);
			check_failures++;
		}
	}
	ERR(fi_av_insert(av, NULL, 1, &fa, 0, NULL));
	cur_case = "fi_av_insert flags";
	{
		char name[256];
		size_t len = sizeof(name);

		OK(fi_getname(&f->ep[0]->fid, name, &len));
		fa = 0;
		ERR(fi_av_insert(av, name, 1, &fa, UNKNOWN_FLAG, NULL));
	}
	cur_case = "fi_av_insertsvc / insertsym";
	if (f->info->addr_format != FI_ADDR_STR) {
		ret = fi_av_insertsvc(av, "no-such-host.invalid", "9500", &fa, 0, NULL);
		CHECK(ret <= 0);
		ret = fi_av_insertsvc(av, "127.0.0.1", "not-a-port", &fa, 0, NULL);
		CHECK(ret <= 0);
	}
	ERR(fi_av_insertsvc(av, NULL, NULL, &fa, 0, NULL));
	ERR(fi_av_insertsym(av, "127.0.0.1", 0, "9500", 1, &fa, UNKNOWN_FLAG, NULL));
	cur_case = "fi_av_remove / lookup";
	fa = 1000;
	ERR(fi_av_remove(av, &fa, 1, 0));
	fa = FI_ADDR_NOTAVAIL;
	ERR(fi_av_remove(av, &fa, 1, 0));
	ERR(fi_av_remove(av, &f->addr[1], 1, UNKNOWN_FLAG));
	ERR(fi_av_remove(av, NULL, 1, 0));
	{
		char buf[256];
		size_t len = sizeof(buf);

		ERR(fi_av_lookup(av, 1000, buf, &len));
		len = sizeof(buf);
		ERR(fi_av_lookup(av, FI_ADDR_NOTAVAIL, buf, &len));
		OK(fi_av_remove(av, &f->addr[1], 1, 0));
		ERR(fi_av_remove(av, &f->addr[1], 1, 0));
		len = sizeof(buf);
		ERR(fi_av_lookup(av, f->addr[1], buf, &len));
	}
	/* An FI_EVENT AV with no EQ bound (fi_av(3): -FI_ENOEQ). */
	cur_case = "FI_EVENT AV without EQ";
	OK(fi_av_open(f->domain, &ev_attr, &eav, NULL));
	if (eav) {
		char name[256];
		size_t len = sizeof(name);

		OK(fi_getname(&f->ep[0]->fid, name, &len));
		ERR_IS(fi_av_insert(eav, name, 1, &fa, 0, NULL), FI_ENOEQ);
		OK(fi_close(&eav->fid));
	}
	cur_case = "fi_av_bind";
	{
		struct fi_eq_attr eq_attr = {.size = 8, .wait_obj = FI_WAIT_NONE};
		struct fid_eq *eq = NULL;

		OK(fi_eq_open(f->fabric, &eq_attr, &eq, NULL));
		if (eq) {
			/* Flags are reserved and must be 0. */
			ERR(fi_av_bind(av, &eq->fid, UNKNOWN_FLAG));
			OK(fi_close(&eq->fid));
		}
		ERR(fi_av_bind(av, &f->cq[0]->fid, 0));
		ERR(fi_av_bind(av, NULL, 0));
	}
	ERR(fi_control(&av->fid, 999, NULL));
}

/* Queues with nothing in them, reads into no buffer, waits on queues
 * without a wait object. */
static void case_queues(struct fx *f)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	struct fi_eq_err_entry eerr;
	struct fi_eq_entry ee;
	fi_addr_t src;
	uint32_t ev;
	struct fi_cntr_attr cna = {.events = FI_CNTR_EVENTS_COMP,
	                           .wait_obj = FI_WAIT_NONE};
	struct fi_cntr_attr cwa = {.events = FI_CNTR_EVENTS_COMP,
	                           .wait_obj = FI_WAIT_UNSPEC};
	struct fi_eq_attr eqa = {.size = 8, .wait_obj = FI_WAIT_NONE, .flags = FI_WRITE};
	struct fid_cntr *cn = NULL, *cw = NULL;
	struct fid_eq *eq = NULL;
	void *w;

	cur_case = "CQ";
	memset(&err, 0, sizeof(err));
	ERR_IS(fi_cq_readerr(f->cq[0], &err, 0), FI_EAGAIN);
	ERR_IS(fi_cq_read(f->cq[0], &e, 1), FI_EAGAIN);
	ERR_IS(fi_cq_readfrom(f->cq[0], &e, 1, &src), FI_EAGAIN);
	ERR(fi_cq_sread(f->cq[0], &e, 1, NULL, 10));
	ERR(fi_cq_sreadfrom(f->cq[0], &e, 1, &src, NULL, 10));
	ERR(fi_control(&f->cq[0]->fid, FI_GETWAIT, &w));
	ERR(fi_control(&f->cq[0]->fid, 999, &w));
	CHECK(fi_cq_strerror(f->cq[0], 12345, NULL, NULL, 0) != NULL);
	/* One completion there: a read into no buffer fails and leaves it. */
	OK(fi_recv(f->ep[1], f->tbuf, 16, NULL, FI_ADDR_UNSPEC, NULL));
	OK(fi_send(f->ep[0], f->lbuf, 16, f->ldesc, f->addr[1], NULL));
	/* Progress both for a while without taking B's entry (a read of no
	 * entries only drives progress). */
	for (uint64_t end = now_ms() + 300; now_ms() < end;) {
		fi_cq_read(f->cq[0], &e, 1);
		fi_cq_read(f->cq[1], NULL, 0);
		usleep(1000);
	}
	ERR(fi_cq_read(f->cq[1], NULL, 1));
	ssize_t n = 0;
	for (uint64_t end = now_ms() + 3000; n != 1 && now_ms() < end;) {
		fi_cq_read(f->cq[0], NULL, 0);
		n = fi_cq_read(f->cq[1], &e, 1);
	}
	CHECK_INT(n, 1);
	memset(f->tbuf, PAT_T, BUFSZ);

	cur_case = "counter";
	OK(fi_cntr_open(f->domain, &cna, &cn, NULL));
	OK(fi_cntr_open(f->domain, &cwa, &cw, NULL));
	if (cn) {
		ERR(fi_cntr_wait(cn, 1, 10));
		ERR(fi_control(&cn->fid, FI_GETWAIT, &w));
		ERR(fi_control(&cn->fid, 999, &w));
		OK(fi_close(&cn->fid));
	}
	if (cw) {
		/* fi_cntr(3): a timeout is -FI_ETIMEDOUT. */
		ERR_IS(fi_cntr_wait(cw, 1, 10), FI_ETIMEDOUT);
		OK(fi_close(&cw->fid));
	}
	cur_case = "EQ";
	OK(fi_eq_open(f->fabric, &eqa, &eq, NULL));
	if (eq) {
		ERR_IS(fi_eq_read(eq, &ev, &ee, sizeof(ee), 0), FI_EAGAIN);
		ERR_IS(fi_eq_readerr(eq, &eerr, 0), FI_EAGAIN);
		ERR(fi_eq_sread(eq, &ev, &ee, sizeof(ee), 10, 0));
		ERR(fi_eq_write(eq, FI_NOTIFY, NULL, sizeof(ee), 0));
		ERR(fi_control(&eq->fid, FI_GETWAIT, &w));
		ERR(fi_control(&eq->fid, 999, &w));
		CHECK(fi_eq_strerror(eq, 12345, NULL, NULL, 0) != NULL);
		/* An event there: a read into no buffer, or a buffer too small
		 * for it, fails and leaves it. */
		ee = (struct fi_eq_entry){.fid = &eq->fid, .context = eq, .data = 1};
		CHECK_INT(fi_eq_write(eq, FI_NOTIFY, &ee, sizeof(ee), 0), sizeof(ee));
		ERR(fi_eq_read(eq, &ev, NULL, sizeof(ee), 0));
		ERR(fi_eq_read(eq, &ev, &ee, 1, 0));
		CHECK_INT(fi_eq_read(eq, &ev, &ee, sizeof(ee), 0), sizeof(ee));
		OK(fi_close(&eq->fid));
	}
}

/* fi_getinfo, fi_fabric, fi_domain, fi_endpoint with what they cannot
 * serve. */
static void case_getinfo(struct fx *f)
{
	struct fi_info *h, *out;
	int ret;

#define GI(ver, node, svc, flags, hints, ...)                                            \
	do {                                                                             \
		out = (struct fi_info *)(uintptr_t)1;                                    \
		ret = fi_getinfo(ver, node, svc, flags, hints, &out);                    \
		ERR_IS(ret, __VA_ARGS__);                                                \
		if (!ret)                                                                \
			fi_freeinfo(out);                                                \
	} while (0)
	cur_case = "fi_getinfo version";
	h = hints_for(f->prov);
	GI(FI_VERSION(99, 0), NULL, NULL, 0, h, FI_ENOSYS, FI_ENODATA);
	/* Above the newest API loom speaks (2.6); 1.99 is below it, as for
	 * libfabric 2.6. */
	GI(FI_VERSION(2, 99), NULL, NULL, 0, h, FI_ENOSYS, FI_ENODATA);
	GI(FI_VERSION(0, 9), NULL, NULL, 0, h, FI_ENOSYS, FI_ENODATA);
	cur_case = "fi_getinfo flags";
	GI(FI_VERSION(1, 17), NULL, NULL, UNKNOWN_FLAG, h, FI_EBADFLAGS, FI_EINVAL,
	   FI_ENODATA);
	cur_case = "fi_getinfo hints";
	h->ep_attr->type = (enum fi_ep_type)99;
	GI(FI_VERSION(1, 17), NULL, NULL, 0, h, FI_ENODATA, FI_EINVAL);
	h->ep_attr->type = FI_EP_RDM;
	h->caps |= UNKNOWN_FLAG;
	GI(FI_VERSION(1, 17), NULL, NULL, 0, h, FI_ENODATA, FI_EBADFLAGS);
	h->caps &= ~UNKNOWN_FLAG;
	h->tx_attr->op_flags = UNKNOWN_FLAG;
	GI(FI_VERSION(1, 17), NULL, NULL, 0, h, FI_ENODATA, FI_EBADFLAGS);
	h->tx_attr->op_flags = 0;
	h->addr_format = 99;
	GI(FI_VERSION(1, 17), NULL, NULL, 0, h, FI_ENODATA, FI_EINVAL);
	h->addr_format = FI_FORMAT_UNSPEC;
	h->domain_attr->threading = (enum fi_threading)99;
	GI(FI_VERSION(1, 17), NULL, NULL, 0, h, FI_ENODATA, FI_EINVAL);
	h->domain_attr->threading = FI_THREAD_UNSPEC;
	h->domain_attr->av_type = (enum fi_av_type)99;
	GI(FI_VERSION(1, 17), NULL, NULL, 0, h, FI_ENODATA, FI_EINVAL);
	h->domain_attr->av_type = FI_AV_UNSPEC;
	h->tx_attr->iov_limit = SIZE_MAX;
	GI(FI_VERSION(1, 17), NULL, NULL, 0, h, FI_ENODATA);
	h->tx_attr->iov_limit = 0;
	h->domain_attr->name = strdup("no-such-domain");
	GI(FI_VERSION(1, 17), NULL, NULL, 0, h, FI_ENODATA);
	free(h->domain_attr->name);
	h->domain_attr->name = NULL;
	free(h->fabric_attr->prov_name);
	h->fabric_attr->prov_name = strdup("no-such-provider");
	GI(FI_VERSION(1, 17), NULL, NULL, 0, h, FI_ENODATA);
	free(h->fabric_attr->prov_name);
	h->fabric_attr->prov_name = strdup(f->prov);
	/* A source address with no length. */
	h->src_addr = malloc(16);
	memset(h->src_addr, 0, 16);
	h->src_addrlen = 0;
	GI(FI_VERSION(1, 17), NULL, NULL, 0, h, FI_EINVAL, FI_ENODATA);
	free(h->src_addr);
	h->src_addr = NULL;
	if (!strcmp(f->prov, "tcp")) {
		GI(FI_VERSION(1, 17), "no-such-host.invalid", "9500", 0, h, 0);
		ret = fi_getinfo(FI_VERSION(1, 17), "not-numeric", NULL, FI_NUMERICHOST,
		                 h, &out);
		ERR(ret);
		if (!ret)
			fi_freeinfo(out);
	}
	/* No place for the result. */
	ERR(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, NULL));
	fi_freeinfo(h);
#undef GI

	cur_case = "fi_fabric";
	{
		struct fid_fabric *fab = NULL;
		struct fi_fabric_attr a = *f->info->fabric_attr;

		a.name = "no-such-fabric";
		ERR(fi_fabric(&a, &fab, NULL));
		if (fab)
			fi_close(&fab->fid);
		fab = NULL;
		a = *f->info->fabric_attr;
		a.prov_name = "no-such-provider";
		ERR(fi_fabric(&a, &fab, NULL));
		if (fab)
			fi_close(&fab->fid);
		ERR(fi_fabric(NULL, &fab, NULL));
		ERR(fi_control(&f->fabric->fid, 999, NULL));
	}
	cur_case = "fi_domain";
	{
		struct fid_domain *dom = NULL;
		struct fi_info *i2 = fi_dupinfo(f->info);

		free(i2->domain_attr->name);
		i2->domain_attr->name = strdup("no-such-domain");
		ERR(fi_domain(f->fabric, i2, &dom, NULL));
		if (dom)
			fi_close(&dom->fid);
		ERR(fi_domain(f->fabric, NULL, &dom, NULL));
		fi_freeinfo(i2);
		ERR(fi_control(&f->domain->fid, 999, NULL));
		ERR(fi_domain_bind(f->domain, &f->cq[0]->fid, 0));
	}
	cur_case = "fi_endpoint";
	{
		struct fid_ep *ep = NULL;
		struct fi_info *i2 = fi_dupinfo(f->info);

		i2->ep_attr->type = (enum fi_ep_type)99;
		ERR(fi_endpoint(f->domain, i2, &ep, NULL));
		if (ep)
			fi_close(&ep->fid);
		i2->ep_attr->type = f->info->ep_attr->type;
		i2->caps |= UNKNOWN_FLAG;
		ep = NULL;
		ERR(fi_endpoint(f->domain, i2, &ep, NULL));
		if (ep)
			fi_close(&ep->fid);
		i2->caps = f->info->caps;
		i2->tx_attr->iov_limit = SIZE_MAX;
		ep = NULL;
		ERR(fi_endpoint(f->domain, i2, &ep, NULL));
		if (ep)
			fi_close(&ep->fid);
		ERR(fi_endpoint(f->domain, NULL, &ep, NULL));
		fi_freeinfo(i2);
	}
}

/* fi_getopt/fi_setopt with options that do not exist or do not fit,
 * fi_control with commands that do not exist, names that do not fit. */
static void case_opts_control(struct fx *f)
{
	struct fid_ep *ep = f->ep[0];
	size_t v = 64, len = sizeof(v);
	char name[256];

	cur_case = "fi_getopt/fi_setopt";
	ERR(fi_getopt(&ep->fid, 99, FI_OPT_MIN_MULTI_RECV, &v, &len));
	len = sizeof(v);
	ERR(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, 999, &v, &len));
	len = sizeof(v);
	ERR(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, -1, &v, &len));
	ERR(fi_setopt(&ep->fid, 99, FI_OPT_MIN_MULTI_RECV, &v, sizeof(v)));
	ERR(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, 999, &v, sizeof(v)));
	ERR(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, -1, &v, sizeof(v)));
	/* Known options with a buffer too small, or none. */
	len = 1;
	ERR(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &len));
	ERR(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, 1));
	ERR(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, NULL, sizeof(v)));
	ERR(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, NULL, &len));
	ERR(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, NULL));

	cur_case = "fi_control";
	ERR(fi_control(&ep->fid, 999, NULL));
	ERR(fi_control(&ep->fid, -1, NULL));
	ERR(fi_control(&ep->fid, FI_ALIAS, NULL));
	{
		struct fid *alias = NULL;

		ERR(fi_alias(&ep->fid, &alias, UNKNOWN_FLAG));
		if (alias)
			fi_close(alias);
	}

	cur_case = "names";
	len = 0;
	ERR_IS(fi_getname(&ep->fid, name, &len), FI_ETOOSMALL);
	CHECK(len > 0);
	ERR(fi_getname(&ep->fid, name, NULL));
	ERR(fi_setname(&ep->fid, NULL, 16));
	len = sizeof(name);
	ERR(fi_getpeer(ep, name, &len));
	ERR(fi_connect(ep, name, NULL, 0));
	ERR(fi_cancel(&ep->fid, (void *)&len));
	ERR(fi_cancel(&ep->fid, NULL));
	{
		struct fid_ep *ep2 = fresh_ep(f);

		if (ep2) {
			/* Before binding: no name from an empty or garbage
			 * buffer (shm takes any text as a chosen name, so
			 * there only: no crash, no over-read). */
			memset(name, 0xff, sizeof(name));
			if (f->info->addr_format != FI_ADDR_STR)
				ERR(fi_setname(&ep2->fid, name, 3));
			else
				(void)fi_setname(&ep2->fid, name, 3);
			ERR(fi_setname(&ep2->fid, name, 0));
			OK(fi_close(&ep2->fid));
		}
	}
}

/* ------------------------------------------------------------------ runner */

struct tcase {
	const char *name;
	void (*fn)(struct fx *f);
};

static const struct tcase cases[] = {
    {"bad_dest", case_bad_dest},
    {"null_buffers", case_null_buffers},
    {"iov_limits", case_iov_limits},
    {"unknown_flags", case_unknown_flags},
    {"before_enable", case_before_enable},
    {"bad_bind", case_bad_bind},
    {"close_busy", case_close_busy},
    {"bad_keys", case_bad_keys},
    {"bad_atomic", case_bad_atomic},
    {"bad_open_attrs", case_bad_open_attrs},
    {"kind_flags", case_kind_flags},
    {"txc_not_enabled", case_txc_not_enabled},
    {"srx_not_enabled", case_srx_not_enabled},
    {"srx_triggered", case_srx_triggered},
    {"bad_mr", case_bad_mr},
    {"bad_av", case_bad_av},
    {"queues", case_queues},
    {"getinfo", case_getinfo},
    {"opts_control", case_opts_control},
};

/* One case in a child: a crash, a sanitizer report or a hang is that
 * case's failure alone. */
static bool run_case(const char *prov, const struct tcase *c)
{
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		struct fx f;

		alarm(60);
		check_count = check_failures = 0;
		cur_prov = prov;
		cur_case = c->name;
		if (fx_open(&f, prov)) {
			fprintf(stderr, "[%s %s] fixture failed\n", prov, c->name);
			_exit(2);
		}
		c->fn(&f);
		cur_case = "fixture close";
		fx_close(&f);
		fprintf(stderr, "[%s %s] %d checks, %d failed\n", prov, c->name,
		        check_count, check_failures);
		fflush(NULL);
		_exit(check_failures ? 1 : 0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid) {
		fprintf(stderr, "[%s %s] fork/wait failed\n", prov, c->name);
		return false;
	}
	if (WIFSIGNALED(st)) {
		fprintf(stderr, "FAIL %s %s: killed by signal %d%s\n", prov, c->name,
		        WTERMSIG(st), WTERMSIG(st) == SIGALRM ? " (hung)" : "");
		return false;
	}
	if (WEXITSTATUS(st)) {
		fprintf(stderr, "FAIL %s %s: exit %d\n", prov, c->name, WEXITSTATUS(st));
		return false;
	}
	fprintf(stderr, "ok   %s %s\n", prov, c->name);
	return true;
}

/* The library this runs on must be loom's, not the system's libfabric
 * (MISUSE_ANY_LIB=1 to run the same binary on the reference). */
static void check_library(void)
{
	Dl_info dl;

	CHECK(dladdr((void *)fi_getinfo, &dl) && dl.dli_fname);
	if (!dl.dli_fname)
		return;
	fprintf(stderr, "library: %s\n", dl.dli_fname);
	if (!getenv("MISUSE_ANY_LIB"))
		CHECK(strstr(dl.dli_fname, "/usr/lib") != dl.dli_fname);
}

int main(int argc, char **argv)
{
	setenv("FI_TCP_IFACE", "lo", 0);
	check_library();
	for (size_t p = 0; p < TEST_NPROVS; p++) {
		const char *prov = test_provs[p].name;

		if (getenv("MISUSE_PROV") && strcmp(getenv("MISUSE_PROV"), prov))
			continue;
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			if (argc > 1 && strcmp(argv[1], cases[i].name))
				continue;
			check_count++;
			if (!run_case(prov, &cases[i]))
				check_failures++;
		}
	}
	return check_done();
}
