/* udp_wire_fuzz.c - fuzz target for the udp link's datagram parser and
 * what is behind it: each input is a program of datagrams that two
 * hostile peers (plain UDP sockets of this process) send to a live udp
 * RDM endpoint A, which has receives posted and a region registered for
 * remote access.  Most datagrams are built well enough to pass the
 * checks the input does not mean to break: the input picks the type,
 * flags, incarnations (A's own, 0, another), epoch and sequence numbers
 * (the next in order, ahead of a gap, old, anything), the acknowledgement
 * fields, and an engine header (any op, flags, lengths, handles, address
 * and key) with its payload; the check is computed unless the input asks
 * for a corrupt one; some datagrams are raw bytes.  Between datagrams A
 * is progressed and its completions read (receives posted again).  A must
 * not crash, hang or touch memory it was not given (the sanitizers
 * watch), and every few hundred inputs, and at the end, a legitimate
 * peer B exchanges messages with it, contents checked (fz_final_check).
 * Each input starts the hostile peers on a newer incarnation, so A sees
 * restarted peers too.
 *
 * Input (a stream of choices, reader.h): records until the input ends;
 * record kind = byte % 8: 0-3 a built datagram, 4 a short DATA packet,
 * 5 a raw one (2-byte length, then bytes), 6 progress A, 7 a peer
 * restarts (newer incarnation). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>

#include "rdm.h"
#include "reader.h"
#include "target.h"
#include "udp.h"

#define NRECV    8
#define RBUF     (128 * 1024)
#define MR_LEN   (64 * 1024)
#define HOSTILES 2
#define CHECK_EVERY 500

struct node {
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct sockaddr_in addr;
};

struct hostile {
	int fd;
	struct sockaddr_in addr;
	uint64_t inc;
	uint32_t epoch;
	uint64_t next;
	/* A's epoch toward it, as far as the hostile can tell: A starts one
	 * for each incarnation it meets (fresh: none sent of this one yet). */
	uint32_t a_epoch;
	bool fresh;
};

static struct node A;
static struct hostile H[HOSTILES];
static uint64_t a_inc; /* A's incarnation, learned from its answer */
static char *rbufs[NRECV];
static struct fi_context rctx[NRECV];
static char *mr_buf;
static struct fid_mr *mr;
static bool ready;
static unsigned long inputs, dgrams, raws, corrupt, completions, errors;

static void die(const char *what, int ret)
{
	fprintf(stderr, "udp_wire: %s: %d\n", what, ret);
	abort();
}

static int node_open(struct node *n)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .size = 4096};
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	size_t len = sizeof(n->addr);
	int ret;

	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SOURCE;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->fabric_attr->prov_name = strdup("udp");
	hints->domain_attr->mr_mode = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	ret = fi_getinfo(fi_version(), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	if (ret)
		return ret;
	ret = fi_fabric(info->fabric_attr, &n->fabric, NULL);
	if (!ret)
		ret = fi_domain(n->fabric, info, &n->domain, NULL);
	if (!ret)
		ret = fi_av_open(n->domain, &ava, &n->av, NULL);
	if (!ret)
		ret = fi_cq_open(n->domain, &cqa, &n->cq, NULL);
	if (!ret)
		ret = fi_endpoint(n->domain, info, &n->ep, NULL);
	if (!ret)
		ret = fi_ep_bind(n->ep, &n->av->fid, 0);
	if (!ret)
		ret = fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!ret)
		ret = fi_enable(n->ep);
	if (!ret)
		ret = fi_getname(&n->ep->fid, &n->addr, &len);
	fi_freeinfo(info);
	return ret;
}

static void node_close(struct node *n)
{
	if (n->ep)
		fi_close(&n->ep->fid);
	if (n->av)
		fi_close(&n->av->fid);
	if (n->cq)
		fi_close(&n->cq->fid);
	if (n->domain)
		fi_close(&n->domain->fid);
	if (n->fabric)
		fi_close(&n->fabric->fid);
	memset(n, 0, sizeof(*n));
}

static void post(int i)
{
	ssize_t r = i % 2 ? fi_recv(A.ep, rbufs[i], RBUF, NULL, FI_ADDR_UNSPEC, &rctx[i])
	                  : fi_trecv(A.ep, rbufs[i], RBUF, NULL, FI_ADDR_UNSPEC, 0, ~0ull,
	                             &rctx[i]);

	if (r)
		die("posting a receive", (int)r);
}

/* Progress A: read its completions (errors too), post receives again. */
static void progress(int rounds)
{
	for (int k = 0; k < rounds; k++) {
		struct fi_cq_tagged_entry e[16];
		ssize_t n = fi_cq_read(A.cq, e, 16);

		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};

			FZ_CHECK(fi_cq_readerr(A.cq, &err, 0) == 1, "readerr");
			errors++;
			for (int i = 0; i < NRECV; i++)
				if (err.op_context == &rctx[i])
					post(i);
			continue;
		}
		FZ_CHECK(n >= 0 || n == -FI_EAGAIN, "fi_cq_read: %zd", n);
		for (ssize_t j = 0; j < n; j++) {
			completions++;
			for (int i = 0; i < NRECV; i++)
				if (e[j].op_context == &rctx[i])
					post(i);
		}
	}
}

/* Whatever A sent the hostile peers: read away (and A's incarnation
 * learned from it). */
static void drain(void)
{
	uint8_t buf[65536];

	for (int k = 0; k < HOSTILES; k++) {
		ssize_t n;

		while ((n = recv(H[k].fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
			if ((size_t)n >= sizeof(struct udp_wire)) {
				struct udp_wire w;

				memcpy(&w, buf, sizeof(w));
				if (w.magic == UDP_MAGIC && w.src_inc)
					a_inc = w.src_inc;
				/* A's packets name its epoch toward us. */
				if (w.magic == UDP_MAGIC && w.dst_inc == H[k].inc &&
				    (w.type == UDP_T_DATA || w.type == UDP_T_MEET))
					H[k].a_epoch = w.epoch;
			}
	}
}

/* The hostile is about to send a datagram of its incarnation. */
static void sending(struct hostile *h)
{
	if (h->fresh)
		h->a_epoch++;
	h->fresh = false;
}

static void setup(void)
{
	struct fi_mr_attr ma = {0};
	struct iovec iov;
	int ret;

	setenv("FI_UDP_IFACE", "lo", 1);
	ret = node_open(&A);
	if (ret)
		die("opening A", ret);
	for (int i = 0; i < NRECV; i++) {
		rbufs[i] = malloc(RBUF);
		post(i);
	}
	mr_buf = calloc(1, MR_LEN);
	iov = (struct iovec){mr_buf, MR_LEN};
	ma.mr_iov = &iov;
	ma.iov_count = 1;
	ma.access = FI_REMOTE_READ | FI_REMOTE_WRITE;
	ret = fi_mr_regattr(A.domain, &ma, 0, &mr);
	if (ret)
		die("registering", ret);
	for (int k = 0; k < HOSTILES; k++) {
		socklen_t len = sizeof(H[k].addr);

		H[k].fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		H[k].addr = (struct sockaddr_in){.sin_family = AF_INET,
		                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		if (H[k].fd < 0 || bind(H[k].fd, (struct sockaddr *)&H[k].addr, len) ||
		    getsockname(H[k].fd, (struct sockaddr *)&H[k].addr, &len))
			die("a hostile socket", -1);
		H[k].inc = 1000 + (uint64_t)k;
		H[k].fresh = true;
	}
	/* Learn A's incarnation: a first packet (an empty CREDIT), which A's
	 * progress acknowledges. */
	for (int t = 0; t < 1000 && !a_inc; t++) {
		uint8_t buf[sizeof(struct udp_wire) + sizeof(struct lm_rdm_hdr)];
		struct udp_wire w = {.magic = UDP_MAGIC,
		                     .version = UDP_PROTO_VERSION,
		                     .type = UDP_T_DATA,
		                     .hdr_len = sizeof(struct lm_rdm_hdr),
		                     .src_inc = H[0].inc,
		                     .epoch = 1,
		                     .seq = 1};
		struct lm_rdm_hdr eh = {.version = LM_RDM_WIRE_VERSION, .op = LM_OP_CREDIT};

		memcpy(buf, &w, sizeof(w));
		memcpy(buf + sizeof(w), &eh, sizeof(eh));
		udp_wire_seal_buf(buf, sizeof(buf));
		sending(&H[0]);
		sendto(H[0].fd, buf, sizeof(buf), 0, (struct sockaddr *)&A.addr, sizeof(A.addr));
		progress(4);
		usleep(1000);
		drain();
	}
	if (!a_inc)
		die("A never acknowledged a packet", 0);
	ready = true;
}

/* A built datagram from hostile k, as the input says. */
static void built(struct fz_reader *r, int k)
{
	static uint8_t buf[65536];
	struct hostile *h = &H[k];
	struct udp_wire w = {.magic = UDP_MAGIC, .version = UDP_PROTO_VERSION};
	struct lm_rdm_hdr eh = {.version = LM_RDM_WIRE_VERSION};
	uint8_t mode = fz_u8(r);
	size_t plen = 0, len;

	static const uint16_t steps[] = {UDP_F_HELLO, UDP_F_REPLY, UDP_F_CONFIRM};

	w.type = mode % 8 == 7   ? fz_u8(r)
	         : mode % 8 == 6 ? UDP_T_MEET
	         : mode & 1      ? UDP_T_DATA
	                         : UDP_T_ACK;
	w.flags = mode & 0x10           ? fz_u8(r)
	          : w.type == UDP_T_ACK  ? fz_below(r, 4)
	          : w.type == UDP_T_MEET ? steps[fz_below(r, 3)]
	                                 : 0;
	/* Now and then an earlier incarnation's (a later one is a restart,
	 * record kind 7: anything larger would end the input's stream). */
	w.src_inc = mode & 0x20 ? h->inc - 1 - fz_below(r, 3) : h->inc;
	switch (fz_below(r, 8)) {
	case 0:
		w.dst_inc = 0;
		break;
	case 1:
		w.dst_inc = fz_u64(r);
		break;
	default:
		w.dst_inc = a_inc;
	}
	w.epoch = fz_below(r, 8) ? h->epoch : fz_u32(r);
	w.ack_epoch = fz_below(r, 4) ? 1 : fz_u32(r);
	w.ack = fz_size(r);
	w.sack = fz_flags(r, 0);
	if (w.type == UDP_T_DATA || w.type == UDP_T_MEET) {
		switch (fz_below(r, 8)) {
		case 0:
			w.seq = h->next + fz_below(r, 80); /* ahead, maybe past the window */
			break;
		case 1:
			w.seq = fz_below(r, 4); /* old, or 0 */
			break;
		case 2:
			w.seq = fz_u64(r);
			break;
		default:
			w.seq = h->next++;
		}
	}
	if (w.type == UDP_T_MEET) {
		/* A handshake step: an offer of any bytes (a link of two
		 * checks it), mostly of a length that passes. */
		plen = fz_below(r, 8) ? fz_below(r, UDP_MEET_MAX + 1) : fz_below(r, 4096);
		w.len = (uint16_t)plen;
		for (size_t i = 0; i < plen; i++)
			buf[sizeof(w) + i] = fz_more(r) ? fz_u8(r) : (uint8_t)i;
		len = sizeof(w) + plen;
	} else if (w.type == UDP_T_DATA) {
		eh.op = (uint8_t)(fz_below(r, 8) ? 1 + fz_below(r, LM_OP_MAX) : fz_u8(r));
		if (fz_below(r, 8) == 0)
			eh.version = fz_u8(r);
		eh.flags = (uint16_t)fz_flags(r, LM_HF_TAGGED | LM_HF_CQ_DATA | LM_HF_ACK);
		eh.tag = fz_below(r, 2) ? 0 : fz_u64(r);
		eh.data = fz_u64(r);
		eh.sreq = fz_size(r);
		eh.rreq = fz_size(r);
		eh.addr = fz_below(r, 2) ? (uint64_t)(uintptr_t)mr_buf + fz_below(r, 255) * 256
		                         : fz_u64(r);
		eh.key = fz_below(r, 2) ? fi_mr_key(mr) : fz_u64(r);
		plen = fz_size(r) % 4096;
		if (fz_below(r, 16) == 0)
			plen = 60000;
		eh.len = fz_below(r, 8) ? (uint32_t)plen : fz_u32(r);
		eh.size = fz_below(r, 4) ? plen : fz_size(r);
		w.hdr_len = (uint8_t)(fz_below(r, 16) ? sizeof(eh) : fz_u8(r));
		w.len = (uint16_t)(fz_below(r, 16) ? plen : fz_u16(r));
		memcpy(buf + sizeof(w), &eh, sizeof(eh));
		for (size_t i = 0; i < plen; i++)
			buf[sizeof(w) + sizeof(eh) + i] = fz_more(r) ? fz_u8(r) : (uint8_t)i;
		len = sizeof(w) + sizeof(eh) + plen;
	} else {
		len = sizeof(w);
	}
	memcpy(buf, &w, sizeof(w));
	udp_wire_seal_buf(buf, len);
	sending(h);
	if (mode & 0x40 && fz_below(r, 2)) {
		/* One check left wrong: the headers', the payload's, or a
		 * byte after the wire header flipped. */
		size_t at = fz_below(r, 3) == 0 && len > sizeof(w) ? sizeof(w) + fz_size(r) % (len - sizeof(w))
		            : fz_below(r, 2) ? offsetof(struct udp_wire, body)
		                            : offsetof(struct udp_wire, check);

		buf[at] ^= (uint8_t)(1 + fz_below(r, 255));
		corrupt++;
	}
	sendto(h->fd, buf, len, 0, (struct sockaddr *)&A.addr, sizeof(A.addr));
	dgrams++;
}

/* A short DATA packet (udp_short) from hostile k: mostly of the pair A
 * knows, with the next sequence number, engine words from a header as
 * built()'s. */
static void built_short(struct fz_reader *r, int k)
{
	static uint8_t buf[4096];
	struct hostile *h = &H[k];
	struct udp_short s = {.magic = UDP_MAGIC, .version = UDP_PROTO_VERSION,
	                      .type = UDP_T_SHORT};
	struct lm_rdm_hdr eh = {.version = LM_RDM_WIRE_VERSION};
	uint64_t words[8];
	size_t at = sizeof(s), plen;
	uint8_t pick;

	eh.op = (uint8_t)(fz_below(r, 8) ? 1 + fz_below(r, LM_OP_MAX) : fz_u8(r));
	eh.flags = (uint16_t)fz_flags(r, LM_HF_TAGGED | LM_HF_CQ_DATA | LM_HF_ACK);
	eh.tag = fz_below(r, 2) ? 0 : fz_u64(r);
	eh.data = fz_below(r, 2) ? 0 : fz_u64(r);
	plen = fz_below(r, 8) ? fz_below(r, UDP_SHORT_MAX + 1) : fz_below(r, 2048);
	eh.len = fz_below(r, 8) ? (uint32_t)plen : fz_u32(r);
	eh.size = fz_below(r, 4) ? plen : fz_size(r);
	memcpy(words, &eh, sizeof(words));
	pick = fz_below(r, 8) ? 0 : fz_u8(r); /* 0: the non-zero words */
	for (unsigned i = 0; i < 8; i++)
		if (pick ? pick >> i & 1 : words[i] != 0) {
			s.words |= (uint8_t)(1u << i);
			memcpy(buf + at, &words[i], 8);
			at += 8;
		}
	s.flags = fz_below(r, 8) ? 0 : fz_u8(r);
	if (s.flags & UDP_S_SACK) {
		uint64_t sack = fz_u64(r);

		memcpy(buf + at, &sack, 8);
		at += 8; /* after the words: misplaced, which the check does not see */
	}
	s.len = (uint16_t)(fz_below(r, 16) ? plen : fz_u16(r));
	sending(h);
	s.pair = fz_below(r, 8) ? udp_pair_tag(h->inc, a_inc, h->epoch, h->a_epoch) : fz_u32(r);
	s.seq = fz_below(r, 4) ? (uint32_t)h->next++ : fz_u32(r);
	s.ack = fz_u32(r);
	for (size_t i = 0; i < plen && at < sizeof(buf); i++)
		buf[at++] = fz_more(r) ? fz_u8(r) : (uint8_t)i;
	memcpy(buf, &s, sizeof(s));
	udp_wire_seal_buf(buf, at);
	if (fz_below(r, 8) == 0) {
		buf[fz_size(r) % at] ^= (uint8_t)(1 + fz_below(r, 255));
		corrupt++;
	}
	sendto(h->fd, buf, at, 0, (struct sockaddr *)&A.addr, sizeof(A.addr));
	dgrams++;
}

static void raw(struct fz_reader *r, int k)
{
	static uint8_t buf[65536];
	size_t len = fz_u16(r) % 2048;

	for (size_t i = 0; i < len; i++)
		buf[i] = fz_u8(r);
	sendto(H[k].fd, buf, len, 0, (struct sockaddr *)&A.addr, sizeof(A.addr));
	raws++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_reader r = {data, size};

	if (!ready)
		setup();
	/* Newer incarnations: A sees restarted peers, streams from 1. */
	for (int k = 0; k < HOSTILES; k++) {
		H[k].inc += HOSTILES;
		H[k].epoch = 1;
		H[k].next = 1;
		H[k].fresh = true;
	}
	for (int n = 0; fz_more(&r) && n < 256; n++) {
		uint8_t kind = fz_u8(&r);
		int k = (kind >> 3) % HOSTILES;

		switch (kind % 8) {
		case 4:
			built_short(&r, k);
			break;
		case 5:
			raw(&r, k);
			break;
		case 6:
			progress(4);
			break;
		case 7:
			H[k].inc += HOSTILES;
			H[k].epoch = 1;
			H[k].next = 1;
			H[k].fresh = true;
			break;
		default:
			built(&r, k);
		}
	}
	progress(8);
	drain();
	if (++inputs % CHECK_EVERY == 0)
		fz_final_check();
	return 0;
}

/* A legitimate peer B: messages both ways, contents checked. */
void fz_final_check(void)
{
	struct node B = {0};
	fi_addr_t a_at, b_at;
	char out[3000], in[3000];
	struct fi_context c_in, c_out, c_b;
	bool got = false, sent = false;
	int ret;

	if (!ready)
		setup();
	ret = node_open(&B);
	if (ret)
		die("opening B", ret);
	FZ_CHECK(fi_av_insert(B.av, &A.addr, 1, &a_at, 0, NULL) == 1, "B's AV insert");
	FZ_CHECK(fi_av_insert(A.av, &B.addr, 1, &b_at, 0, NULL) == 1, "A's AV insert");
	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (char)(i * 7 + 3);
	memset(in, 0, sizeof(in));
	FZ_CHECK(fi_recv(B.ep, in, sizeof(in), NULL, FI_ADDR_UNSPEC, &c_b) == 0, "B recv");
	FZ_CHECK(fi_send(A.ep, out, sizeof(out), NULL, b_at, &c_out) == 0, "A send");
	for (int t = 0; t < 20000 && !(got && sent); t++) {
		struct fi_cq_tagged_entry e[16];
		ssize_t n = fi_cq_read(A.cq, e, 16);

		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};

			fi_cq_readerr(A.cq, &err, 0);
			FZ_CHECK(err.op_context != &c_out, "A's send to B failed: %d", err.err);
			for (int i = 0; i < NRECV; i++)
				if (err.op_context == &rctx[i])
					post(i);
		}
		for (ssize_t j = 0; j < n; j++) {
			sent |= e[j].op_context == &c_out;
			for (int i = 0; i < NRECV; i++)
				if (e[j].op_context == &rctx[i])
					post(i);
		}
		n = fi_cq_read(B.cq, e, 1);
		if (n == 1 && e[0].op_context == &c_b) {
			FZ_CHECK(!memcmp(in, out, sizeof(out)), "B got other bytes than A sent");
			got = true;
		}
		usleep(100);
	}
	FZ_CHECK(got && sent, "A and B could not talk (got %d, sent %d)", got, sent);
	/* And B to A, into one of A's posted receives (a message A's other
	 * traffic may come between). */
	FZ_CHECK(fi_send(B.ep, out, 100, NULL, a_at, &c_in) == 0, "B send");
	got = false;
	for (int t = 0; t < 20000 && !got; t++) {
		struct fi_cq_tagged_entry e[16];
		ssize_t n = fi_cq_read(A.cq, e, 16);

		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};

			fi_cq_readerr(A.cq, &err, 0);
			for (int i = 0; i < NRECV; i++)
				if (err.op_context == &rctx[i])
					post(i);
		}
		for (ssize_t j = 0; j < n; j++)
			for (int i = 0; i < NRECV; i++)
				if (e[j].op_context == &rctx[i]) {
					got |= e[j].len == 100 && !memcmp(rbufs[i], out, 100);
					post(i);
				}
		fi_cq_read(B.cq, e, 16);
		usleep(100);
	}
	FZ_CHECK(got, "A never got B's message");
	fi_av_remove(A.av, &b_at, 1, 0);
	node_close(&B);
}

void fz_report(void)
{
	fprintf(stderr,
	        "udp_wire: %lu inputs, %lu built datagrams (%lu with a wrong check), %lu "
	        "raw; A completed %lu, %lu with errors\n",
	        inputs, dgrams, corrupt, raws, completions, errors);
}

size_t fz_generate(uint64_t *rng, uint8_t *buf, size_t cap)
{
	size_t n = 32 + (size_t)(fz_rand(rng) % 600);

	if (n > cap)
		n = cap;
	for (size_t i = 0; i < n; i++) {
		uint64_t v = fz_rand(rng);

		buf[i] = (uint8_t)(v % 4 ? v % 32 : v >> 8);
	}
	return n;
}

int fz_write_seeds(const char *dir)
{
	uint8_t s[4][512];
	uint64_t rng = 7;

	for (int i = 0; i < 4; i++) {
		char name[16];

		fz_generate(&rng, s[i], sizeof(s[i]));
		s[i][0] = (uint8_t)(i == 3 ? 5 : 0); /* a built datagram; a raw one */
		snprintf(name, sizeof(name), "seed-%d", i);
		if (fz_save(dir, name, s[i], sizeof(s[i])))
			return -1;
	}
	return 0;
}
