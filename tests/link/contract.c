/* contract.c - every link against the contract of src/rdm/link.h, through
 * its ops table alone: the test-only loop link, shm, and tcp and udp over
 * IPv4 and IPv6 loopback.  A link joins by one entry in kinds[].
 *
 * Two links of a kind, A and B, in this process:
 *  - addresses: binary -> text -> binary gives the same bytes, and the
 *    text's length is reported with a zero-sized buffer;
 *  - packets: thousands, of every size class up to max_payload, gathered
 *    from up to three pieces, both ways at once, each delivered once, in
 *    order, with the sender's address, its header and its bytes;
 *    send_words and send_many (where offered) the same as send, and so
 *    send_many with the payload lent, the memory rewritten for the next
 *    packet once unlend (where offered) returned;
 *  - back-pressure: A sends without B polling until the link refuses
 *    (-FI_EAGAIN) or a cap; then every packet taken arrives, once;
 *  - sleeping: B armed, its fd stays quiet with nothing sent and becomes
 *    readable when A sends; wake_after makes it readable by itself;
 *    idle (where offered) says "nothing" once everything was read;
 *  - bulk_read / bulk_write where the caps say so;
 *  - mark / delivered (where offered): taken packets are delivered once
 *    the peer read them;
 * and for links between processes, a peer that exits: peer_alive turns
 * false or a send fails, within seconds, and never hangs. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "loop_link.h"
#include "rdm.h"
#include "shm.h"
#include "tcp.h"
#include "udp.h"

#define HDR     sizeof(struct lm_rdm_hdr)
#define NPKT    3000
#define CAP     200000 /* back-pressure: packets sent at most */
#define WAIT_MS 5000

struct kind {
	const char *name;
	const struct lm_link_ops *ops;
	void *ctx;
	/* the name to open with (NULL: a fresh one) */
	const void *(*name_of)(void);
	bool processes; /* links in two processes meet */
};

static struct tcp_params tcp_ctx = {.conn_timeout_ms = 10000};
static struct udp_params udp_ctx = {.peer_timeout_ms = 10000, .sockbuf = 8 << 20};

static const void *tcp4_name(void)
{
	static struct sockaddr_in a;

	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return &a;
}

static const void *tcp6_name(void)
{
	static struct sockaddr_in6 a;

	a.sin6_family = AF_INET6;
	a.sin6_addr = in6addr_loopback;
	return &a;
}

static const struct kind kinds[] = {
    {"loop", &loop_link_ops, NULL, NULL, false},
    {"shm", &shm_link_ops, NULL, NULL, true},
    {"tcp", &tcp_link_ops, &tcp_ctx, tcp4_name, true},
    {"tcp6", &tcp6_link_ops, &tcp_ctx, tcp6_name, true},
    {"udp", &udp_link_ops, &udp_ctx, tcp4_name, true},
    {"udp6", &udp6_link_ops, &udp_ctx, tcp6_name, true},
};

/* ---- one end: a link and what arrived ---------------------------------- */

struct end {
	const struct kind *k;
	struct lm_link *link;
	unsigned char addr[LM_LINK_ADDR_MAX];
	struct lm_link_peer *peer; /* the other end */
	/* arrivals */
	uint64_t next_seq, got, bad;
	bool check_src;
	unsigned char want_src[LM_LINK_ADDR_MAX];
};

/* Packet i: its header carries i and its payload length; the payload is
 * a function of both. */
static size_t len_of(const struct end *e, uint64_t i)
{
	size_t max = e->link->max_payload, in = e->link->inline_max;
	size_t choices[] = {0, 1, 7, in ? in - 1 : 0, in, in + 1, 4096, max - 1, max};
	size_t n = choices[i % (sizeof(choices) / sizeof(choices[0]))];

	return n > max ? max : n;
}

static unsigned char byte_of(uint64_t i, size_t off)
{
	return (unsigned char)(i * 131 + off * 7 + 1);
}

static void hdr_of(struct lm_rdm_hdr *h, uint64_t i, size_t len)
{
	memset(h, 0, sizeof(*h));
	h->version = 1;
	h->op = 3;
	h->size = len;
	h->tag = i;
	h->data = ~i;
}

static void on_recv(void *arg, const void *src, const void *hdr, const void *payload,
                    size_t len)
{
	struct end *e = arg;
	struct lm_rdm_hdr h;
	const unsigned char *p = payload;
	bool ok;

	memcpy(&h, hdr, sizeof(h));
	ok = h.tag == e->next_seq && h.data == ~h.tag && h.size == len && h.version == 1 &&
	     h.op == 3;
	for (size_t i = 0; ok && i < len; i++)
		ok = p[i] == byte_of(h.tag, i);
	if (e->check_src && memcmp(src, e->want_src, e->k->ops->addrlen))
		ok = false;
	if (!ok && e->bad++ < 3)
		fprintf(stderr, "%s: packet %llu (want %llu), %zu bytes: wrong\n", e->k->name,
		        (unsigned long long)h.tag, (unsigned long long)e->next_seq, len);
	e->next_seq = h.tag + 1;
	e->got++;
}

static int end_open(struct end *e, const struct kind *k)
{
	struct lm_link_attr attr = {.hdr_size = HDR, .recv = on_recv, .arg = e};
	int ret;

	memset(e, 0, sizeof(*e));
	e->k = k;
	ret = k->ops->open(k->ctx, &attr, k->name_of ? k->name_of() : NULL, &e->link);
	if (ret) {
		fprintf(stderr, "%s: open: %d\n", k->name, ret);
		return ret;
	}
	memcpy(e->addr, e->link->addr, k->ops->addrlen);
	return 0;
}

static void end_close(struct end *e)
{
	if (e->peer)
		e->k->ops->peer_close(e->link, e->peer);
	if (e->link)
		e->k->ops->close(e->link);
	e->link = NULL;
	e->peer = NULL;
}

static int meet(struct end *a, struct end *b)
{
	int ret = a->k->ops->peer_open(a->link, b->addr, &a->peer);

	if (!ret)
		ret = b->k->ops->peer_open(b->link, a->addr, &b->peer);
	b->check_src = a->check_src = true;
	memcpy(b->want_src, a->addr, a->k->ops->addrlen);
	memcpy(a->want_src, b->addr, b->k->ops->addrlen);
	return ret;
}

static void poll_both(struct end *a, struct end *b)
{
	a->k->ops->poll(a->link, 64);
	b->k->ops->poll(b->link, 64);
}

enum how { BY_SEND, BY_WORDS, BY_MANY, BY_LENT };

/* Packet i from a to b: 0, -FI_EAGAIN, or an error. */
static ssize_t send_one(struct end *a, uint64_t i, enum how how)
{
	const struct lm_link_ops *ops = a->k->ops;
	size_t len = len_of(a, i), cut1 = len / 3, cut2 = len / 3 * 2;
	static unsigned char buf[1 << 20];
	struct lm_rdm_hdr h;
	struct iovec iov[3] = {{buf, cut1}, {buf + cut1, cut2 - cut1}, {buf + cut2, len - cut2}};

	if (len > sizeof(buf))
		return -FI_EINVAL;
	for (size_t o = 0; o < len; o++)
		buf[o] = byte_of(i, o);
	hdr_of(&h, i, len);
	if (how == BY_WORDS && ops->send_words && len <= a->link->inline_max) {
		uint64_t w[8], words[8];
		unsigned mask = 0, n = 0;

		memcpy(w, &h, sizeof(w));
		for (unsigned k = 0; k < 8; k++)
			if (w[k]) {
				mask |= 1u << k;
				words[n++] = w[k];
			}
		return ops->send_words(a->link, a->peer, words, mask, buf, len);
	}
	if (how == BY_MANY && ops->send_many) {
		struct lm_link_pkt p = {&h, iov, 3, NULL};
		ssize_t n = ops->send_many(a->link, a->peer, &p, 1);

		return n == 1 ? 0 : n;
	}
	if (how == BY_LENT && ops->send_many) {
		struct lm_link_pkt p = {&h, &(struct iovec){buf, len}, 1, buf};
		ssize_t n = ops->send_many(a->link, a->peer, &p, 1);

		/* buf is the next packet's: what this one still needs is
		 * the link's own after unlend. */
		if (ops->unlend)
			ops->unlend(a->link, a->peer, buf);
		return n == 1 ? 0 : n;
	}
	return ops->send(a->link, a->peer, &h, iov, 3);
}

/* Send packet i, polling both ends while the link says "not now". */
static int send_retry(struct end *a, struct end *b, uint64_t i, enum how how)
{
	uint64_t end = lm_now_ms() + WAIT_MS;
	ssize_t r;

	while ((r = send_one(a, i, how)) == -FI_EAGAIN && lm_now_ms() < end)
		poll_both(a, b);
	if (r)
		fprintf(stderr, "%s: send %llu: %zd\n", a->k->name, (unsigned long long)i, r);
	return (int)r;
}

static bool wait_got(struct end *a, struct end *b, struct end *who, uint64_t want)
{
	uint64_t end = lm_now_ms() + WAIT_MS;

	while (who->got < want && lm_now_ms() < end)
		poll_both(a, b);
	return who->got == want;
}

/* ---- the cases ------------------------------------------------------------ */

static void addresses(struct end *a)
{
	const struct lm_link_ops *ops = a->k->ops;
	unsigned char back[LM_LINK_ADDR_MAX];
	char text[512];
	size_t len = 0;

	CHECK_INT(ops->addr_to_str(a->addr, NULL, &len), 0);
	CHECK(len > 1 && len <= ops->addr_str_max && len <= sizeof(text));
	CHECK_INT(ops->addr_to_str(a->addr, text, &len), 0);
	CHECK_INT(strlen(text) + 1, len);
	memset(back, 0, sizeof(back));
	CHECK_INT(ops->addr_from_str(text, NULL, back), 0);
	CHECK(!memcmp(back, a->addr, ops->addrlen));
	if (ops->addr_check)
		CHECK_INT(ops->addr_check(a->addr), 0);
}

static void packets(struct end *a, struct end *b)
{
	static const enum how hows[] = {BY_SEND, BY_WORDS, BY_MANY, BY_LENT};
	const size_t n_how = LM_ARRAY_SIZE(hows);

	/* Both ways at once, every way of sending, interleaved. */
	for (uint64_t i = 0; i < NPKT; i++) {
		if (send_retry(a, b, i, hows[i % n_how]) ||
		    send_retry(b, a, i, hows[(i + 1) % n_how])) {
			CHECK(0);
			return;
		}
		if (i % 16 == 0)
			poll_both(a, b);
	}
	CHECK(wait_got(a, b, b, NPKT));
	CHECK(wait_got(a, b, a, NPKT));
	CHECK_INT(a->bad, 0);
	CHECK_INT(b->bad, 0);
}

static void back_pressure(struct end *a, struct end *b)
{
	uint64_t base = b->next_seq, sent = 0;
	ssize_t r = 0;

	/* A keeps sending; B does not read.  A may poll (a link may need
	 * to, to move what it queued) without reading B. */
	while (sent < CAP) {
		r = send_one(a, base + sent, BY_SEND);
		if (r == -FI_EAGAIN) {
			a->k->ops->poll(a->link, 64);
			r = send_one(a, base + sent, BY_SEND);
			if (r == -FI_EAGAIN)
				break;
		}
		if (r) {
			fprintf(stderr, "%s: back-pressure send: %zd\n", a->k->name, r);
			CHECK(0);
			return;
		}
		sent++;
	}
	fprintf(stderr, "%s: %llu packets taken before the link said %s\n", a->k->name,
	        (unsigned long long)sent, r == -FI_EAGAIN ? "-FI_EAGAIN" : "nothing");
	CHECK(wait_got(a, b, b, b->got + sent));
	CHECK_INT(b->next_seq, base + sent);
	CHECK_INT(b->bad, 0);
	/* Room again. */
	CHECK_INT(send_retry(a, b, base + sent, BY_SEND), 0);
	CHECK(wait_got(a, b, b, b->got + 1));
}

static bool readable(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

static void sleeping(struct end *a, struct end *b)
{
	const struct lm_link_ops *ops = b->k->ops;
	uint64_t want = b->got + 1;

	if (b->link->fd < 0) {
		fprintf(stderr, "%s: no fd to sleep on\n", b->k->name);
		CHECK(0);
		return;
	}
	/* Everything read: idle, and an armed fd stays quiet. */
	for (int i = 0; i < 10; i++)
		poll_both(a, b);
	if (ops->idle)
		CHECK(ops->idle(b->link));
	ops->arm(b->link);
	CHECK(!readable(b->link->fd, 100));
	CHECK_INT(send_retry(a, b, b->next_seq, BY_SEND), 0);
	for (uint64_t end = lm_now_ms() + WAIT_MS; !readable(b->link->fd, 10);) {
		a->k->ops->poll(a->link, 64); /* a's side may need to push it */
		if (lm_now_ms() > end) {
			fprintf(stderr, "%s: the armed fd was never readable\n", b->k->name);
			CHECK(0);
			break;
		}
	}
	ops->disarm(b->link);
	CHECK(wait_got(a, b, b, want));
	if (ops->wake_after) {
		for (int i = 0; i < 10; i++)
			poll_both(a, b);
		ops->arm(b->link);
		ops->wake_after(b->link, 50);
		CHECK(readable(b->link->fd, WAIT_MS));
		ops->disarm(b->link);
	}
	CHECK_INT(b->bad, 0);
}

static void bulk(struct end *a)
{
	const struct lm_link_ops *ops = a->k->ops;
	char theirs[3000], mine[3000];
	struct iovec l = {mine, sizeof(mine)}, r = {theirs, sizeof(theirs)};

	/* This process is the peer: its memory is "remote". */
	if ((a->link->caps & LM_LINK_BULK_READ) && ops->bulk_read) {
		ssize_t n;

		memset(theirs, 'r', sizeof(theirs));
		memset(mine, 0, sizeof(mine));
		n = ops->bulk_read(a->link, a->peer, &l, 1, &r, 1);
		if (n != -FI_ENOSYS) {
			CHECK_INT(n, (ssize_t)sizeof(mine));
			CHECK(!memcmp(mine, theirs, sizeof(mine)));
		}
	}
	if ((a->link->caps & LM_LINK_BULK_WRITE) && ops->bulk_write) {
		ssize_t n;

		memset(mine, 'w', sizeof(mine));
		memset(theirs, 0, sizeof(theirs));
		n = ops->bulk_write(a->link, a->peer, &l, 1, &r, 1);
		if (n != -FI_ENOSYS) {
			CHECK_INT(n, (ssize_t)sizeof(mine));
			CHECK(!memcmp(mine, theirs, sizeof(mine)));
		}
	}
}

static void marks(struct end *a, struct end *b)
{
	const struct lm_link_ops *ops = a->k->ops;
	uint64_t m, end;
	bool done = false;

	if (!ops->mark || !ops->delivered)
		return;
	CHECK_INT(send_retry(a, b, b->next_seq, BY_SEND), 0);
	m = ops->mark(a->link, a->peer);
	CHECK(wait_got(a, b, b, b->got + 1));
	for (end = lm_now_ms() + WAIT_MS; !done && lm_now_ms() < end;) {
		poll_both(a, b);
		done = !m || ops->delivered(a->link, a->peer, m, true);
	}
	CHECK(done);
}

/* A peer in another process that closes its link and exits: a's sends
 * to it fail or its peer_alive turns false within WAIT_MS; nothing
 * hangs. */
static void peer_exits(const struct kind *k)
{
	struct end a, c;
	int fds[2];
	pid_t pid;
	uint64_t end, i = 0;
	bool told = false;

	if (pipe(fds) || end_open(&a, k)) {
		CHECK(0);
		return;
	}
	fflush(stderr);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		if (end_open(&c, k))
			_exit(2);
		if (write(fds[1], c.addr, sizeof(c.addr)) != sizeof(c.addr))
			_exit(3);
		/* Read until the parent's packet came, then go. */
		for (end = lm_now_ms() + WAIT_MS; !c.got && lm_now_ms() < end;)
			k->ops->poll(c.link, 64);
		end_close(&c);
		_exit(0);
	}
	close(fds[1]);
	if (read(fds[0], c.addr, sizeof(c.addr)) != sizeof(c.addr) ||
	    k->ops->peer_open(a.link, c.addr, &a.peer)) {
		CHECK(0);
		close(fds[0]);
		waitpid(pid, NULL, 0);
		end_close(&a);
		return;
	}
	close(fds[0]);
	a.check_src = false;
	/* Meet it while it lives (one packet), then let it go. */
	CHECK_INT(send_retry(&a, &a, 0, BY_SEND), 0);
	CHECK(waitpid(pid, NULL, 0) == pid);
	for (end = lm_now_ms() + WAIT_MS; !told && lm_now_ms() < end; i++) {
		ssize_t r = send_one(&a, i, BY_SEND);

		k->ops->poll(a.link, 64);
		told = (r && r != -FI_EAGAIN) || !k->ops->peer_alive(a.link, a.peer);
		usleep(1000);
	}
	if (!told)
		fprintf(stderr, "%s: a peer that exited is still alive after %d ms\n", k->name,
		        WAIT_MS);
	CHECK(told);
	end_close(&a);
}

static void run_kind(const struct kind *k)
{
	struct end a, b;
	int fails = check_failures;

	if (end_open(&a, k) || end_open(&b, k)) {
		CHECK(0);
		end_close(&a);
		return;
	}
	CHECK(a.link->max_payload > 0);
	CHECK(a.link->inline_max <= a.link->max_payload);
	CHECK(memcmp(a.addr, b.addr, k->ops->addrlen)); /* two addresses */
	addresses(&a);
	CHECK_INT(meet(&a, &b), 0);
	CHECK(k->ops->peer_alive(a.link, a.peer));
	packets(&a, &b);
	back_pressure(&a, &b);
	sleeping(&a, &b);
	bulk(&a);
	marks(&a, &b);
	CHECK(k->ops->peer_alive(a.link, a.peer));
	end_close(&a);
	end_close(&b);
	if (k->processes)
		peer_exits(k);
	fprintf(stderr, "link %s: %s\n", k->name, check_failures == fails ? "passed" : "FAILED");
}

int main(int argc, char **argv)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (argc < 2 || !strcmp(argv[1], kinds[i].name))
			run_kind(&kinds[i]);
	return check_done();
}
