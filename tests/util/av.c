/* av.c - address vectors through the public fi_av_* calls on the utiltest
 * domain, with a 16-byte test address format: insert (binary and
 * FI_ADDR_STR), insertsvc, insertsym, remove, lookup, straddr, the
 * data-path lookups, 100,000 entries, asynchronous inserts reported on an
 * EQ, and bad input; then the tcp provider's idea of a bad address. */
/* The calls libfabric 2.x deprecated (wait and poll sets, fi_av_bind) are
 * tested here on purpose: 1.x programs still make them. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "testdom.h"

/* ---- the test address format: "fi_test://h<host>:<port>" ---------------- */

struct taddr {
	uint32_t magic;
	uint32_t host;
	uint32_t port;
	uint32_t zero;
};
#define TMAGIC 0x7e57add7u

static int inserts, removes, peers_live;

static int parse_u32(const char *s, uint32_t *v)
{
	char *end;
	unsigned long long x;

	if (!s || *s < '0' || *s > '9')
		return -1;
	x = strtoull(s, &end, 10);
	if (*end || x > UINT32_MAX)
		return -1;
	*v = (uint32_t)x;
	return 0;
}

static int t_from_str(const char *node, const char *service, void *addr)
{
	struct taddr a = {.magic = TMAGIC};
	unsigned char ip6[16];
	struct in_addr ip4;
	char tail;

	if (!node)
		return -FI_EINVAL;
	if (!service) {
		if (sscanf(node, "fi_test://h%u:%u%c", &a.host, &a.port, &tail) != 2)
			return -FI_EINVAL;
	} else {
		if (!strncmp(node, "host", 4) && !parse_u32(node + 4, &a.host))
			;
		else if (node[0] == 'h' && !parse_u32(node + 1, &a.host))
			;
		else if (inet_pton(AF_INET, node, &ip4) == 1)
			a.host = ntohl(ip4.s_addr);
		else if (inet_pton(AF_INET6, node, ip6) == 1)
			a.host = (uint32_t)ip6[12] << 24 | (uint32_t)ip6[13] << 16 |
			         (uint32_t)ip6[14] << 8 | ip6[15];
		else
			return -FI_EINVAL;
		if (parse_u32(service, &a.port) || a.port > 65535)
			return -FI_EINVAL;
	}
	memcpy(addr, &a, sizeof(a));
	return 0;
}

static int t_to_str(const void *addr, char *buf, size_t *len)
{
	struct taddr a;
	char tmp[64];
	int n;

	memcpy(&a, addr, sizeof(a));
	n = snprintf(tmp, sizeof(tmp), "fi_test://h%u:%u", a.host, a.port);
	if (*len) {
		size_t c = LM_MIN(*len - 1, (size_t)n);

		memcpy(buf, tmp, c);
		buf[c] = '\0';
	}
	*len = (size_t)n + 1;
	return 0;
}

struct tpeer {
	fi_addr_t fi_addr;
	uint32_t host;
};

/* Host 0 is "unreachable": the provider refuses it. */
static int t_on_insert(struct lm_av *av, fi_addr_t fi_addr, const void *addr, void **peer)
{
	struct taddr a;
	struct tpeer *p;

	(void)av;
	memcpy(&a, addr, sizeof(a));
	if (!a.host)
		return -FI_EADDRNOTAVAIL;
	p = malloc(sizeof(*p));
	if (!p)
		return -FI_ENOMEM;
	p->fi_addr = fi_addr;
	p->host = a.host;
	*peer = p;
	inserts++;
	peers_live++;
	return 0;
}

static void t_on_remove(struct lm_av *av, fi_addr_t fi_addr, void *peer)
{
	struct tpeer *p = peer;

	(void)av;
	if (p->fi_addr == fi_addr)
		removes++;
	peers_live--;
	free(p);
}

/* Not of the format at all (no magic, padding set): refused before the
 * provider is asked for a peer, as tcp refuses what is no sockaddr_in. */
static int t_check(const void *addr)
{
	struct taddr a;

	memcpy(&a, addr, sizeof(a));
	return a.magic == TMAGIC && !a.zero ? 0 : -FI_EADDRNOTAVAIL;
}

static const struct lm_av_addr_ops test_ops = {
    .addrlen = sizeof(struct taddr),
    .from_str = t_from_str,
    .to_str = t_to_str,
    .check = t_check,
    .on_insert = t_on_insert,
    .on_remove = t_on_remove,
};

static struct taddr ta(uint32_t host, uint32_t port)
{
	struct taddr a = {.magic = TMAGIC, .host = host, .port = port};

	return a;
}

/* ---- helpers ------------------------------------------------------------- */

static struct testdom t;

static struct lm_domain *dom(void)
{
	return lm_container_of(t.domain, struct lm_domain, domain_fid);
}

static struct lm_av *lav(struct fid_av *av)
{
	return lm_container_of(av, struct lm_av, av_fid);
}

/* Binary addresses unless str: the domain's addr_format decides. */
static struct fid_av *open_av(enum fi_av_type type, uint64_t flags, size_t count,
                              bool str)
{
	struct fi_av_attr attr = {.type = type, .count = count, .flags = flags};
	struct fid_av *av = NULL;

	dom()->info->addr_format = str ? FI_ADDR_STR : FI_FORMAT_UNSPEC;
	CHECK_INT(fi_av_open(t.domain, &attr, &av, NULL), 0);
	return av;
}

static bool addr_is(struct fid_av *av, fi_addr_t fa, uint32_t host, uint32_t port)
{
	const struct taddr *a = lm_av_addr(lav(av), fa);

	return a && a->magic == TMAGIC && a->host == host && a->port == port && !a->zero;
}

/* ---- tests ----------------------------------------------------------------- */

static void test_open(void)
{
	struct fi_av_attr attr = {.type = FI_AV_UNSPEC};
	struct fid_av *av = NULL;
	int ref;

	dom()->av_addr_ops = NULL;
	CHECK_INT(fi_av_open(t.domain, &attr, &av, NULL), -FI_ENOSYS);
	dom()->av_addr_ops = &test_ops;
	CHECK_INT(fi_av_open(t.domain, NULL, &av, NULL), -FI_EINVAL);
	CHECK_INT(lm_av_open(t.domain, &attr, NULL, NULL), -FI_EINVAL);
	/* Named (shared): opened, and gone with its last user. */
	{
		char name[64];

		snprintf(name, sizeof(name), "loom-util-av-%d", (int)getpid());
		attr.name = name;
		CHECK_INT(fi_av_open(t.domain, &attr, &av, NULL), 0);
		CHECK(attr.map_addr != NULL);
		if (av)
			CHECK_INT(fi_close(&av->fid), 0);
		av = NULL;
		attr.map_addr = NULL;
		attr.flags = FI_READ;
		CHECK(fi_av_open(t.domain, &attr, &av, NULL) < 0);
		attr.name = NULL;
	}
	/* Read-only is for a named AV. */
	attr.flags = FI_READ;
	CHECK_INT(fi_av_open(t.domain, &attr, &av, NULL), -FI_EINVAL);
	attr.flags = FI_SEND;
	CHECK_INT(fi_av_open(t.domain, &attr, &av, NULL), -FI_EBADFLAGS);
	attr.flags = 0;
	attr.type = (enum fi_av_type)7;
	CHECK_INT(fi_av_open(t.domain, &attr, &av, NULL), -FI_EINVAL);
	attr.type = FI_AV_UNSPEC;
	attr.rx_ctx_bits = 64;
	CHECK_INT(fi_av_open(t.domain, &attr, &av, NULL), -FI_EINVAL);
	attr.rx_ctx_bits = 0;
	CHECK(av == NULL);

	/* UNSPEC becomes TABLE, reported back; the AV holds the domain. */
	ref = atomic_load(&dom()->ref);
	attr.flags = FI_SYMMETRIC;
	CHECK_INT(fi_av_open(t.domain, &attr, &av, (void *)0x5), 0);
	CHECK_INT(attr.type, FI_AV_TABLE);
	CHECK_INT(lav(av)->type, FI_AV_TABLE);
	CHECK(av->fid.context == (void *)0x5);
	CHECK_INT(av->fid.fclass, FI_CLASS_AV);
	CHECK_INT(atomic_load(&dom()->ref), ref + 1);
	CHECK_INT(fi_close(&t.domain->fid), -FI_EBUSY);
	/* Bound endpoints keep it open. */
	atomic_fetch_add(&lav(av)->ref, 1);
	CHECK_INT(fi_close(&av->fid), -FI_EBUSY);
	atomic_fetch_sub(&lav(av)->ref, 1);
	CHECK_INT(fi_close(&av->fid), 0);
	CHECK_INT(atomic_load(&dom()->ref), ref);
}

static void test_table_binary(void)
{
	struct fid_av *av = open_av(FI_AV_TABLE, 0, 2, false);
	struct taddr in[4] = {ta(1, 2), ta(3, 4), ta(0, 5), ta(6, 7)}, out;
	fi_addr_t fa[4] = {0};
	int se[4] = {-1, -1, -1, -1};
	size_t len;
	char s[64];

	inserts = removes = 0;
	/* Host 0 fails alone; FI_SYNC_ERR says why. */
	CHECK_INT(fi_av_insert(av, in, 4, fa, FI_SYNC_ERR, se), 3);
	CHECK_HEX(fa[0], 0);
	CHECK_HEX(fa[1], 1);
	CHECK_HEX(fa[2], FI_ADDR_NOTAVAIL);
	CHECK_HEX(fa[3], 2);
	CHECK_INT(se[0], 0);
	CHECK_INT(se[1], 0);
	CHECK_INT(se[2], FI_EADDRNOTAVAIL);
	CHECK_INT(se[3], 0);
	CHECK_INT(inserts, 3);

	/* Data-path lookups. */
	CHECK(addr_is(av, 0, 1, 2));
	CHECK(addr_is(av, 1, 3, 4));
	CHECK(addr_is(av, 2, 6, 7));
	CHECK(lm_av_addr(lav(av), 3) == NULL);
	CHECK(lm_av_addr(lav(av), FI_ADDR_NOTAVAIL) == NULL);
	struct tpeer *p = lm_av_peer(lav(av), 2);
	CHECK(p != NULL && p->host == 6 && p->fi_addr == 2);
	CHECK(lm_av_peer(lav(av), 3) == NULL);
	CHECK_HEX(lm_av_reverse(lav(av), &in[1]), 1);
	CHECK_HEX(lm_av_reverse(lav(av), &in[2]), FI_ADDR_NOTAVAIL);
	CHECK_HEX(lm_av_user_id(lav(av), 2), 2);

	/* fi_av_lookup: whole, truncated, bad. */
	memset(&out, 0, sizeof(out));
	len = sizeof(out);
	CHECK_INT(fi_av_lookup(av, 1, &out, &len), 0);
	CHECK_INT(len, sizeof(struct taddr));
	CHECK(!memcmp(&out, &in[1], sizeof(out)));
	memset(&out, 0xee, sizeof(out));
	len = 4;
	CHECK_INT(fi_av_lookup(av, 2, &out, &len), 0);
	CHECK_INT(len, sizeof(struct taddr));
	CHECK_HEX(out.magic, TMAGIC);
	CHECK_HEX(out.host, 0xeeeeeeee);
	len = 0;
	CHECK_INT(fi_av_lookup(av, 2, NULL, &len), 0);
	CHECK_INT(len, sizeof(struct taddr));
	len = sizeof(out);
	CHECK_INT(fi_av_lookup(av, 3, &out, &len), -FI_EINVAL);
	CHECK_INT(fi_av_lookup(av, FI_ADDR_NOTAVAIL, &out, &len), -FI_EINVAL);
	CHECK_INT(fi_av_lookup(av, 0, &out, NULL), -FI_EINVAL);
	CHECK_INT(fi_av_lookup(av, 0, NULL, &len), -FI_EINVAL);

	/* fi_av_straddr: any address of the format, inserted or not. */
	struct taddr other = ta(123, 45);
	len = sizeof(s);
	CHECK(fi_av_straddr(av, &other, s, &len) == s);
	CHECK_STR(s, "fi_test://h123:45");
	CHECK_INT(len, strlen("fi_test://h123:45") + 1);
	len = 5;
	CHECK(fi_av_straddr(av, &other, s, &len) == s);
	CHECK_STR(s, "fi_t");
	CHECK_INT(len, strlen("fi_test://h123:45") + 1);
	CHECK(fi_av_straddr(av, NULL, s, &len) == NULL);
	CHECK(fi_av_straddr(av, &other, s, NULL) == NULL);

	/* The 2.x calls loom does not offer (no FI_AUTH_KEY, FI_AV_USER_ID). */
	{
		fi_addr_t a = FI_ADDR_NOTAVAIL;
		size_t key_size = sizeof(other);

		CHECK_INT(fi_av_insert_auth_key(av, &other, sizeof(other), &a, 0), -FI_ENOSYS);
		CHECK_HEX(a, FI_ADDR_NOTAVAIL);
		CHECK_INT(fi_av_lookup_auth_key(av, 1, &other, &key_size), -FI_ENOSYS);
		CHECK_INT(fi_av_set_user_id(av, 1, 7, 0), -FI_ENOSYS);
	}

	/* Remove: all or nothing, flags reserved. */
	fi_addr_t rm[2] = {1, 99};
	CHECK_INT(fi_av_remove(av, rm, 2, 0), -FI_EINVAL);
	CHECK(addr_is(av, 1, 3, 4));
	CHECK_INT(fi_av_remove(av, rm, 1, 1), -FI_EBADFLAGS);
	CHECK_INT(fi_av_remove(av, NULL, 1, 0), -FI_EINVAL);
	CHECK_INT(fi_av_remove(av, rm, 1, 0), 0);
	CHECK_INT(removes, 1);
	CHECK(lm_av_addr(lav(av), 1) == NULL);
	CHECK_HEX(lm_av_reverse(lav(av), &in[1]), FI_ADDR_NOTAVAIL);
	len = sizeof(out);
	CHECK_INT(fi_av_lookup(av, 1, &out, &len), -FI_EINVAL);
	CHECK_INT(fi_av_remove(av, rm, 1, 0), -FI_EINVAL);

	/* TABLE: the lowest unused index is reused, then the table goes on. */
	struct taddr more[2] = {ta(8, 8), ta(9, 9)};
	CHECK_INT(fi_av_insert(av, more, 2, fa, 0, NULL), 2);
	CHECK_HEX(fa[0], 1);
	CHECK_HEX(fa[1], 3);
	/* fi_addr may be NULL for a table. */
	struct taddr ten = ta(10, 10);
	CHECK_INT(fi_av_insert(av, &ten, 1, NULL, FI_MORE, NULL), 1);
	CHECK(addr_is(av, 4, 10, 10));

	/* A duplicate shares the entry until its last removal. */
	CHECK_INT(fi_av_insert(av, &ten, 1, fa, 0, NULL), 1);
	CHECK_HEX(fa[0], 4);
	rm[0] = 4;
	CHECK_INT(fi_av_remove(av, rm, 1, 0), 0);
	CHECK(addr_is(av, 4, 10, 10));
	CHECK_INT(fi_av_remove(av, rm, 1, 0), 0);
	CHECK(lm_av_addr(lav(av), 4) == NULL);

	/* User ids ride along; the fi_addr out is still the index. */
	struct taddr u = ta(11, 11);
	fa[0] = 0xabc;
	CHECK_INT(fi_av_insert(av, &u, 1, fa, FI_AV_USER_ID, NULL), 1);
	CHECK_HEX(fa[0], 4);
	CHECK_HEX(lm_av_user_id(lav(av), 4), 0xabc);
	CHECK_INT(fi_av_insert(av, &u, 1, NULL, FI_AV_USER_ID, NULL), -FI_EINVAL);

	/* Bad input. */
	CHECK_INT(fi_av_insert(av, NULL, 1, fa, 0, NULL), -FI_EINVAL);
	CHECK_INT(fi_av_insert(av, NULL, 0, fa, 0, NULL), 0);
	CHECK_INT(fi_av_insert(av, in, 1, fa, FI_SEND, NULL), -FI_EBADFLAGS);
	CHECK_INT(fi_av_insert(av, in, 1, fa, FI_SYNC_ERR, NULL), -FI_EINVAL);
	CHECK_INT(fi_av_insertsvc(av, NULL, "1", fa, 0, NULL), -FI_EINVAL);
	CHECK_INT(fi_av_bind(av, &t.domain->fid, 0), -FI_EINVAL);

	/* Close releases every peer still attached. */
	CHECK_INT(peers_live, 5);
	CHECK_INT(fi_close(&av->fid), 0);
	CHECK_INT(peers_live, 0);
}

static void test_str_format(void)
{
	struct fid_av *av = open_av(FI_AV_MAP, 0, 0, true);
	static const char packed[] = "fi_test://h5:6\0garbage\0fi_test://h1:2";
	char unterminated[FI_NAME_MAX + 32];
	fi_addr_t fa[4], fs[8];
	int se[2];
	char s[64];
	size_t len;

	CHECK_INT(lav(av)->type, FI_AV_MAP);
	/* FI_ADDR_STR: the buffer holds the strings packed one after another,
	 * as libfabric's providers read it; a bad one fails alone. */
	CHECK_INT(fi_av_insert(av, packed, 3, fa, 0, NULL), 2);
	CHECK(fa[0] != FI_ADDR_NOTAVAIL);
	CHECK_HEX(fa[1], FI_ADDR_NOTAVAIL);
	CHECK(fa[2] != FI_ADDR_NOTAVAIL);
	CHECK(addr_is(av, fa[0], 5, 6));
	CHECK(addr_is(av, fa[2], 1, 2));
	/* Not terminated within FI_NAME_MAX: that entry fails, and so does
	 * the next, whose start is unknown; nothing past the bound is read. */
	memset(unterminated, 'h', sizeof(unterminated));
	memcpy(unterminated + FI_NAME_MAX, "fi_test://h3:4", 15);
	CHECK_INT(fi_av_insert(av, unterminated, 2, fs, FI_SYNC_ERR, se), 0);
	CHECK_INT(se[0], FI_EINVAL);
	CHECK_INT(se[1], FI_EINVAL);
	CHECK_HEX(fs[0], FI_ADDR_NOTAVAIL);
	CHECK_HEX(fs[1], FI_ADDR_NOTAVAIL);
	/* ...and lookup gives text back. */
	len = sizeof(s);
	CHECK_INT(fi_av_lookup(av, fa[0], s, &len), 0);
	CHECK_STR(s, "fi_test://h5:6");
	CHECK_INT(len, 15);
	len = 8;
	CHECK_INT(fi_av_lookup(av, fa[0], s, &len), 0);
	CHECK_STR(s, "fi_test");
	CHECK_INT(len, 15);
	len = sizeof(s);
	CHECK(fi_av_straddr(av, "fi_test://h1:1", s, &len) == s);
	CHECK_STR(s, "fi_test://h1:1");
	CHECK_INT(len, 15);

	/* insertsvc: node and service, or a whole FI_ADDR_STR as node. */
	CHECK_INT(fi_av_insertsvc(av, "h7", "8", &fa[1], 0, NULL), 1);
	CHECK(addr_is(av, fa[1], 7, 8));
	CHECK_INT(fi_av_insertsvc(av, "fi_test://h9:10", NULL, &fa[2], 0, NULL), 1);
	CHECK(addr_is(av, fa[2], 9, 10));
	CHECK_INT(fi_av_insertsvc(av, "h7", "port", &fa[3], 0, NULL), 0);
	CHECK_HEX(fa[3], FI_ADDR_NOTAVAIL);
	CHECK_HEX(lm_av_reverse(lav(av), lm_av_addr(lav(av), fa[1])), fa[1]);

	/* insertsym: every service of a node, then the next node. */
	CHECK_INT(fi_av_insertsym(av, "host10", 2, "5000", 2, fs, 0, NULL), 4);
	CHECK(addr_is(av, fs[0], 10, 5000));
	CHECK(addr_is(av, fs[1], 10, 5001));
	CHECK(addr_is(av, fs[2], 11, 5000));
	CHECK(addr_is(av, fs[3], 11, 5001));
	/* Suffix width is kept (host09 -> host10) and carries past it. */
	CHECK_INT(fi_av_insertsym(av, "host09", 3, "1", 1, fs, 0, NULL), 3);
	CHECK(addr_is(av, fs[0], 9, 1));
	CHECK(addr_is(av, fs[1], 10, 1));
	CHECK(addr_is(av, fs[2], 11, 1));
	/* IP addresses count as numbers. */
	CHECK_INT(fi_av_insertsym(av, "10.1.1.255", 2, "7", 1, fs, 0, NULL), 2);
	CHECK(addr_is(av, fs[0], 0x0a0101ff, 7));
	CHECK(addr_is(av, fs[1], 0x0a010200, 7));
	CHECK_INT(fi_av_insertsym(av, "fe80::1:ffff", 2, "7", 1, fs, 0, NULL), 2);
	CHECK(addr_is(av, fs[0], 0x0001ffff, 7));
	CHECK(addr_is(av, fs[1], 0x00020000, 7));
	/* A single node needs no suffix; a node that fails to parse fails
	 * only its own addresses. */
	CHECK_INT(fi_av_insertsym(av, "h3", 1, "100", 3, fs, 0, NULL), 3);
	CHECK(addr_is(av, fs[2], 3, 102));
	CHECK_INT(fi_av_insertsym(av, "h1", 1, "65535", 2, fs, 0, NULL), 1);
	CHECK(addr_is(av, fs[0], 1, 65535));
	CHECK_HEX(fs[1], FI_ADDR_NOTAVAIL);
	/* Bad symmetric input. */
	CHECK_INT(fi_av_insertsym(av, "host", 2, "1", 1, fs, 0, NULL), -FI_EINVAL);
	CHECK_INT(fi_av_insertsym(av, "h1", 1, "p1", 2, fs, 0, NULL), -FI_EINVAL);
	CHECK_INT(fi_av_insertsym(av, "h1", 1, "1x", 2, fs, 0, NULL), -FI_EINVAL);
	CHECK_INT(fi_av_insertsym(av, "255.255.255.255", 2, "1", 1, fs, 0, NULL), 1);
	CHECK_HEX(fs[1], FI_ADDR_NOTAVAIL);
	CHECK_INT(fi_av_insertsym(av, NULL, 1, "1", 1, fs, 0, NULL), -FI_EINVAL);
	CHECK_INT(fi_av_insertsym(av, "h1", 1, NULL, 1, fs, 0, NULL), -FI_EINVAL);
	CHECK_INT(fi_av_insertsym(av, "h1", 0, "1", 1, fs, 0, NULL), 0);
	CHECK_INT(fi_close(&av->fid), 0);
	CHECK_INT(peers_live, 0);
}

/* A reader on the data path while the table grows under it. */
struct reader {
	struct lm_av *av;
	atomic_size_t published;
	atomic_bool stop;
	long bad, reads;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	unsigned seed = 1;

	while (!atomic_load(&r->stop)) {
		size_t n = atomic_load(&r->published), i;
		const struct taddr *a;

		if (!n)
			continue;
		i = (size_t)rand_r(&seed) % n;
		a = lm_av_addr(r->av, i);
		if (!a || a->host != i + 1)
			r->bad++;
		r->reads++;
	}
	return NULL;
}

static void test_100k(void)
{
	enum { N = 100000 };
	struct fid_av *av = open_av(FI_AV_TABLE, 0, 0, false);
	struct taddr *in = calloc(N, sizeof(*in));
	fi_addr_t *fa = calloc(N, sizeof(*fa));
	long bad = 0;
	uint64_t t0;
	size_t len;

	for (uint32_t i = 0; i < N; i++)
		in[i] = ta(i + 1, i % 65536);
	t0 = lm_now_ms();
	CHECK_INT(fi_av_insert(av, in, N, fa, 0, NULL), N);
	for (size_t i = 0; i < N; i++) {
		struct taddr out;

		len = sizeof(out);
		if (fa[i] != i ||
		    !addr_is(av, i, (uint32_t)i + 1, (uint32_t)(i % 65536)) ||
		    lm_av_reverse(lav(av), &in[i]) != i ||
		    fi_av_lookup(av, i, &out, &len) || memcmp(&out, &in[i], sizeof(out)))
			bad++;
	}
	CHECK_INT(bad, 0);
	CHECK_INT(peers_live, N);
	/* Remove in batches, odd indices first, then the rest. */
	for (size_t i = 0; i < N / 2; i++)
		fa[i] = 2 * i + 1;
	for (size_t i = 0; i < N / 2; i++)
		fa[N / 2 + i] = 2 * i;
	for (size_t i = 0; i < N; i += 1000)
		CHECK_INT(fi_av_remove(av, &fa[i], 1000, 0), 0);
	uint64_t ms = lm_now_ms() - t0;
	CHECK(ms < 2000);
	CHECK_INT(peers_live, 0);
	CHECK_INT(lav(av)->used, 0);
	for (size_t i = 0; i < N; i += 997)
		bad += lm_av_addr(lav(av), i) != NULL ||
		       lm_av_reverse(lav(av), &in[i]) != FI_ADDR_NOTAVAIL;
	CHECK_INT(bad, 0);
	/* Everything free again: numbering restarts at 0. */
	CHECK_INT(fi_av_insert(av, &in[7], 1, fa, 0, NULL), 1);
	CHECK_HEX(fa[0], 0);
	CHECK_INT(fi_close(&av->fid), 0);
	fprintf(stderr, "100k insert+lookup+remove: %llu ms\n", (unsigned long long)ms);

	/* Lock-free lookups stay valid while inserts grow the table. */
	struct reader r = {0};
	pthread_t th;
	av = open_av(FI_AV_TABLE, 0, 0, false);
	r.av = lav(av);
	pthread_create(&th, NULL, reader_main, &r);
	for (size_t i = 0; i < N; i++) {
		if (fi_av_insert(av, &in[i], 1, NULL, 0, NULL) != 1)
			bad++;
		atomic_store(&r.published, i + 1);
	}
	atomic_store(&r.stop, true);
	pthread_join(th, NULL);
	CHECK_INT(bad, 0);
	CHECK_INT(r.bad, 0);
	CHECK_INT(fi_close(&av->fid), 0);
	free(in);
	free(fa);
}

static void test_async(void)
{
	struct fi_eq_attr eattr = {.wait_obj = FI_WAIT_UNSPEC};
	struct fid_av *av = open_av(FI_AV_TABLE, FI_EVENT, 0, false);
	struct taddr in[3] = {ta(1, 1), ta(0, 2), ta(3, 3)};
	struct fi_eq_err_entry err;
	struct fi_eq_entry e;
	struct fid_eq *eq;
	fi_addr_t fa[3];
	uint32_t ev;
	int se[3];

	CHECK_INT(fi_eq_open(t.fabric, &eattr, &eq, NULL), 0);
	CHECK_INT(fi_av_insert(av, in, 3, fa, 0, NULL), -FI_ENOEQ);
	CHECK_INT(fi_av_bind(av, &eq->fid, 1), -FI_EBADFLAGS);
	CHECK_INT(fi_av_bind(av, NULL, 0), -FI_EINVAL);
	CHECK_INT(fi_av_bind(av, &eq->fid, 0), 0);
	CHECK_INT(fi_av_bind(av, &eq->fid, 0), -FI_EINVAL);
	CHECK_INT(fi_close(&eq->fid), -FI_EBUSY);
	CHECK_INT(fi_av_insert(av, in, 3, fa, FI_SYNC_ERR, se), -FI_EINVAL);

	CHECK_INT(fi_av_insert(av, in, 3, fa, 0, (void *)0x99), 0);
	CHECK_HEX(fa[0], 0);
	CHECK_HEX(fa[1], FI_ADDR_NOTAVAIL);
	CHECK_HEX(fa[2], 1);
	/* One error per failed address, then the completion. */
	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e), 0), -FI_EAVAIL);
	memset(&err, 0, sizeof(err));
	CHECK_INT(fi_eq_readerr(eq, &err, 0), sizeof(err));
	CHECK(err.fid == &av->fid);
	CHECK(err.context == (void *)0x99);
	CHECK_INT(err.data, 1);
	CHECK_INT(err.err, FI_EADDRNOTAVAIL);
	CHECK_INT(fi_eq_sread(eq, &ev, &e, sizeof(e), 1000, 0), sizeof(e));
	CHECK_INT(ev, FI_AV_COMPLETE);
	CHECK(e.fid == &av->fid);
	CHECK(e.context == (void *)0x99);
	CHECK_INT(e.data, 2);
	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e), 0), -FI_EAGAIN);

	/* Every insert call completes, even one inserting nothing. */
	CHECK_INT(fi_av_insertsvc(av, "h4", "4", fa, 0, (void *)0x1), 0);
	CHECK_INT(fi_av_insert(av, in, 0, fa, 0, (void *)0x2), 0);
	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e), 0), sizeof(e));
	CHECK(e.context == (void *)0x1);
	CHECK_INT(e.data, 1);
	CHECK_INT(fi_eq_read(eq, &ev, &e, sizeof(e), 0), sizeof(e));
	CHECK(e.context == (void *)0x2);
	CHECK_INT(e.data, 0);
	CHECK(addr_is(av, 2, 4, 4));

	CHECK_INT(fi_close(&av->fid), 0);
	CHECK_INT(fi_close(&eq->fid), 0);
}

/* The provider's check refuses an address per entry, the same in every
 * way an insert reports (fabtests' av_bad_sync, av_goodbad_vector_sync,
 * _sync_err and _async), before it takes an index or a peer. */
static void test_check(void)
{
	struct fi_eq_attr eattr = {.wait_obj = FI_WAIT_UNSPEC};
	struct fid_av *av = open_av(FI_AV_TABLE, 0, 0, false);
	struct taddr in[2] = {ta(1, 1), {0}}, junk = ta(2, 2), good = ta(3, 3);
	struct fi_eq_err_entry err;
	struct fi_eq_entry e;
	struct fid_eq *eq;
	fi_addr_t fa[2];
	uint32_t ev;
	int se[2] = {-1, 0};

	inserts = 0;
	fa[0] = 0x5;
	CHECK_INT(fi_av_insert(av, &in[1], 1, fa, 0, NULL), 0);
	CHECK_HEX(fa[0], FI_ADDR_NOTAVAIL);
	junk.zero = 1;
	CHECK_INT(fi_av_insert(av, &junk, 1, fa, 0, NULL), 0);
	CHECK_HEX(fa[0], FI_ADDR_NOTAVAIL);
	fa[1] = 0x5;
	CHECK_INT(fi_av_insert(av, in, 2, fa, 0, NULL), 1);
	CHECK_HEX(fa[0], 0);
	CHECK_HEX(fa[1], FI_ADDR_NOTAVAIL);
	CHECK_INT(fi_av_insert(av, in, 2, NULL, FI_SYNC_ERR, se), 1);
	CHECK_INT(se[0], 0);
	CHECK_INT(se[1], FI_EADDRNOTAVAIL);
	CHECK_INT(inserts, 1);
	CHECK_INT(fi_av_insert(av, &good, 1, fa, 0, NULL), 1);
	CHECK_HEX(fa[0], 1);
	CHECK_INT(fi_close(&av->fid), 0);

	av = open_av(FI_AV_TABLE, FI_EVENT, 0, false);
	CHECK_INT(fi_eq_open(t.fabric, &eattr, &eq, NULL), 0);
	CHECK_INT(fi_av_bind(av, &eq->fid, 0), 0);
	fa[1] = 0x5;
	CHECK_INT(fi_av_insert(av, in, 2, fa, 0, (void *)0x77), 0);
	CHECK_INT(fi_eq_sread(eq, &ev, &e, sizeof(e), 1000, 0), -FI_EAVAIL);
	memset(&err, 0, sizeof(err));
	CHECK_INT(fi_eq_readerr(eq, &err, 0), sizeof(err));
	CHECK(err.fid == &av->fid);
	CHECK(err.context == (void *)0x77);
	CHECK_INT(err.data, 1);
	CHECK_INT(err.err, FI_EADDRNOTAVAIL);
	CHECK_INT(fi_eq_sread(eq, &ev, &e, sizeof(e), 1000, 0), sizeof(e));
	CHECK_INT(ev, FI_AV_COMPLETE);
	CHECK_INT(e.data, 1);
	CHECK_HEX(fa[0], 0);
	CHECK_HEX(fa[1], FI_ADDR_NOTAVAIL);
	CHECK_INT(fi_close(&av->fid), 0);
	CHECK_INT(fi_close(&eq->fid), 0);
}

/* ---- the tcp provider's addresses ------------------------------------------ */

static struct fid_av *tcp_av(struct fid_domain *d, uint64_t flags)
{
	struct fi_av_attr attr = {.type = FI_AV_TABLE, .count = 32, .flags = flags};
	struct fid_av *av = NULL;

	CHECK_INT(fi_av_open(d, &attr, &av, NULL), 0);
	return av;
}

static struct sockaddr_in sin_of(const char *ip, uint16_t port)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

/* What no connect can reach fails its own insertion with
 * FI_EADDRNOTAVAIL (as in the reference): the all-zero sockaddr fabtests'
 * av_test uses as its invalid address, another family, port 0, and bytes
 * set where the family has none (peers are matched on normalized bytes).
 * The wildcard address with a port is taken: it is the name of a link
 * bound without a source address. */
static void tcp_bad_addresses(struct fid_fabric *fab, struct fid_domain *d)
{
	struct fi_eq_attr eattr = {.wait_obj = FI_WAIT_UNSPEC};
	struct sockaddr_in bad[5], v[2];
	struct fi_eq_err_entry err;
	struct fi_eq_entry e;
	struct fid_eq *eq;
	struct fid_av *av;
	fi_addr_t fa[2];
	uint32_t ev;
	int se[2];

	memset(&bad[0], 0, sizeof(bad[0]));
	bad[1] = sin_of("127.0.0.1", 0);
	bad[2] = sin_of("127.0.0.1", 9);
	bad[2].sin_family = AF_UNIX;
	bad[3] = sin_of("127.0.0.1", 9);
	bad[3].sin_family = AF_INET6;
	bad[4] = sin_of("127.0.0.1", 9);
	memset(bad[4].sin_zero, 0xff, sizeof(bad[4].sin_zero));
	av = tcp_av(d, 0);
	if (!av)
		return;
	for (size_t i = 0; i < 5; i++) {
		fa[0] = 0x5;
		se[0] = -1;
		CHECK_INT(fi_av_insert(av, &bad[i], 1, fa, 0, NULL), 0);
		CHECK_HEX(fa[0], FI_ADDR_NOTAVAIL);
		CHECK_INT(fi_av_insert(av, &bad[i], 1, NULL, FI_SYNC_ERR, se), 0);
		CHECK_INT(se[0], FI_EADDRNOTAVAIL);
	}
	CHECK_INT(fi_av_insertsvc(av, "127.0.0.1", "0", fa, 0, NULL), 0);
	CHECK_HEX(fa[0], FI_ADDR_NOTAVAIL);

	/* One good, one bad: the good one alone goes in, at index 0. */
	v[0] = sin_of("127.0.0.1", 9);
	memset(&v[1], 0, sizeof(v[1]));
	fa[1] = 0x5;
	CHECK_INT(fi_av_insert(av, v, 2, fa, 0, NULL), 1);
	CHECK_HEX(fa[0], 0);
	CHECK_HEX(fa[1], FI_ADDR_NOTAVAIL);
	se[0] = -1;
	se[1] = 0;
	CHECK_INT(fi_av_insert(av, v, 2, NULL, FI_SYNC_ERR, se), 1);
	CHECK_INT(se[0], 0);
	CHECK_INT(se[1], FI_EADDRNOTAVAIL);
	v[1] = sin_of("0.0.0.0", 9);
	CHECK_INT(fi_av_insert(av, &v[1], 1, fa, 0, NULL), 1);
	CHECK_HEX(fa[0], 1);
	CHECK_INT(fi_close(&av->fid), 0);

	/* Asynchronous: the error event (with the index), then the count. */
	CHECK_INT(fi_eq_open(fab, &eattr, &eq, NULL), 0);
	av = tcp_av(d, FI_EVENT);
	if (!av || !eq)
		return;
	CHECK_INT(fi_av_bind(av, &eq->fid, 0), 0);
	memset(&v[1], 0, sizeof(v[1]));
	CHECK_INT(fi_av_insert(av, v, 2, fa, 0, (void *)0x77), 0);
	CHECK_INT(fi_eq_sread(eq, &ev, &e, sizeof(e), 1000, 0), -FI_EAVAIL);
	memset(&err, 0, sizeof(err));
	CHECK_INT(fi_eq_readerr(eq, &err, 0), sizeof(err));
	CHECK(err.fid == &av->fid);
	CHECK(err.context == (void *)0x77);
	CHECK_INT(err.data, 1);
	CHECK_INT(err.err, FI_EADDRNOTAVAIL);
	CHECK_INT(fi_eq_sread(eq, &ev, &e, sizeof(e), 1000, 0), sizeof(e));
	CHECK_INT(ev, FI_AV_COMPLETE);
	CHECK_INT(e.data, 1);
	CHECK_HEX(fa[1], FI_ADDR_NOTAVAIL);
	CHECK_INT(fi_close(&av->fid), 0);
	CHECK_INT(fi_close(&eq->fid), 0);
}

/* The same on an IPv6 domain: a sockaddr_in6 with port 0, or an IPv4
 * address, is refused; ::1 with a port goes in. */
static void tcp6_bad_addresses(struct fid_domain *d)
{
	struct sockaddr_in6 a[3];
	struct fid_av *av = tcp_av(d, 0);
	fi_addr_t fa[3];

	if (!av)
		return;
	memset(a, 0, sizeof(a));
	for (int i = 0; i < 3; i++) {
		a[i].sin6_family = AF_INET6;
		a[i].sin6_port = htons(9);
		a[i].sin6_addr = in6addr_loopback;
	}
	a[1].sin6_port = 0;
	a[2].sin6_family = AF_INET;
	CHECK_INT(fi_av_insert(av, a, 3, fa, 0, NULL), 1);
	CHECK_HEX(fa[0], 0);
	CHECK_HEX(fa[1], FI_ADDR_NOTAVAIL);
	CHECK_HEX(fa[2], FI_ADDR_NOTAVAIL);
	CHECK_INT(fi_close(&av->fid), 0);
}

/* fi_getinfo for a tcp RDM domain of the address format, on node. */
static void on_tcp(uint32_t format, const char *node,
                   void (*fn)(struct fid_fabric *fab, struct fid_domain *d))
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct fid_fabric *fab;
	struct fid_domain *d;

	if (!hints)
		return;
	hints->fabric_attr->prov_name = strdup("tcp");
	hints->ep_attr->type = FI_EP_RDM;
	hints->addr_format = format;
	if (fi_getinfo(FI_VERSION(1, 17), node, "0", FI_SOURCE, hints, &info)) {
		/* No IPv6 loopback here: only the IPv4 run is required. */
		CHECK(format == FI_SOCKADDR_IN6);
		fi_freeinfo(hints);
		return;
	}
	CHECK_INT(fi_fabric(info->fabric_attr, &fab, NULL), 0);
	CHECK_INT(fi_domain(fab, info, &d, NULL), 0);
	fn(fab, d);
	CHECK_INT(fi_close(&d->fid), 0);
	CHECK_INT(fi_close(&fab->fid), 0);
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

static void tcp6_run(struct fid_fabric *fab, struct fid_domain *d)
{
	(void)fab;
	tcp6_bad_addresses(d);
}

static void test_tcp(void)
{
	on_tcp(FI_SOCKADDR_IN, "127.0.0.1", tcp_bad_addresses);
	on_tcp(FI_SOCKADDR_IN6, "::1", tcp6_run);
}

static void test_rx_bits(void)
{
	struct fi_av_attr attr = {.type = FI_AV_TABLE, .rx_ctx_bits = 4};
	struct taddr a = ta(5, 5);
	struct fid_av *av;
	fi_addr_t fa;

	dom()->info->addr_format = FI_FORMAT_UNSPEC;
	CHECK_INT(fi_av_open(t.domain, &attr, &av, NULL), 0);
	CHECK_INT(fi_av_insert(av, &a, 1, &fa, 0, NULL), 1);
	CHECK(addr_is(av, fi_rx_addr(fa, 3, 4), 5, 5));
	CHECK(lm_av_peer(lav(av), fi_rx_addr(fa, 15, 4)) != NULL);
	CHECK(lm_av_addr(lav(av), fi_rx_addr(fa + 1, 3, 4)) == NULL);
	CHECK_INT(fi_close(&av->fid), 0);
}

/* FI_THREAD_DOMAIN: the AV takes no lock. */
static void test_threading(void)
{
	struct taddr a = ta(5, 5);
	struct fid_av *av;
	fi_addr_t fa;

	av = open_av(FI_AV_TABLE, 0, 0, false);
	CHECK(lav(av)->lock.on);
	CHECK_INT(fi_close(&av->fid), 0);
	testdom_close(&t);
	CHECK_INT(testdom_open(&t, FI_THREAD_DOMAIN, NULL, NULL), 0);
	if (!t.domain)
		return;
	dom()->av_addr_ops = &test_ops;
	av = open_av(FI_AV_TABLE, 0, 0, false);
	CHECK(!lav(av)->lock.on);
	CHECK_INT(fi_av_insert(av, &a, 1, &fa, 0, NULL), 1);
	CHECK_HEX(lm_av_reverse(lav(av), &a), fa);
	CHECK_INT(fi_close(&av->fid), 0);
}

int main(void)
{
	alarm(120); /* no hang */
	CHECK_INT(testdom_open(&t, FI_THREAD_SAFE, NULL, NULL), 0);
	if (!t.domain)
		return check_done();
	dom()->av_addr_ops = &test_ops;
	test_open();
	test_table_binary();
	test_str_format();
	test_100k();
	test_async();
	test_check();
	test_rx_bits();
	test_threading();
	testdom_close(&t);
	test_tcp();
	return check_done();
}
