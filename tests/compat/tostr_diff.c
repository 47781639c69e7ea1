/* tostr_diff.c - prints fi_strerror, fi_tostr and fi_tostr_r output for a wide
 * set of inputs, so tostr_diff.sh can compare loom against another libfabric. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include <dlfcn.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include "v1_names.h"

/* Pointers appear in the output (handle, nic, fid, BGQ/MLX addresses), so
 * every object whose address is printed lives in an arena mapped at a fixed
 * address: both runs then print the same text whatever ASLR does. */
#define ARENA_ADDR ((void *)0x3f0000000000ULL)
#define ARENA_SIZE (1 << 20)

static char *arena;
static size_t arena_used;

static void *arena_alloc(size_t size)
{
	void *p = arena + arena_used;

	arena_used += (size + 15) & ~(size_t)15;
	if (arena_used > ARENA_SIZE) {
		fprintf(stderr, "tostr_diff: arena exhausted\n");
		exit(2);
	}
	return p;
}

static const char *show(const char *s)
{
	return s ? s : "<NULL>";
}

/* ---- fi_strerror ---------------------------------------------------------- */

static void print_strerror(void)
{
	for (int i = -10; i <= 300; i++)
		printf("strerror %d: %s\n", i, fi_strerror(i));
	for (int i = 1000; i <= 1010; i++)
		printf("strerror %d: %s\n", i, fi_strerror(i));
	for (int i = -300; i <= -250; i++)
		printf("strerror %d: %s\n", i, fi_strerror(i));
	printf("strerror INT_MAX: %s\n", fi_strerror(INT_MAX));
	printf("strerror INT_MIN: %s\n", fi_strerror(INT_MIN));
	printf("strerror INT_MIN+1: %s\n", fi_strerror(INT_MIN + 1));
}

/* ---- scalar types ------------------------------------------------------- */

static const struct {
	enum fi_type type;
	const char *name;
} flag_types[] = {
    {FI_TYPE_CAPS, "CAPS"},
    {FI_TYPE_OP_FLAGS, "OP_FLAGS"},
    {FI_TYPE_MSG_ORDER, "MSG_ORDER"},
    {FI_TYPE_MODE, "MODE"},
    {FI_TYPE_CQ_EVENT_FLAGS, "CQ_EVENT_FLAGS"},
};

static const struct {
	enum fi_type type;
	const char *name;
} enum_types[] = {
    {FI_TYPE_EP_TYPE, "EP_TYPE"},
    {FI_TYPE_ADDR_FORMAT, "ADDR_FORMAT"},
    {FI_TYPE_THREADING, "THREADING"},
    {FI_TYPE_PROGRESS, "PROGRESS"},
    {FI_TYPE_PROTOCOL, "PROTOCOL"},
    {FI_TYPE_AV_TYPE, "AV_TYPE"},
    {FI_TYPE_ATOMIC_TYPE, "ATOMIC_TYPE"},
    {FI_TYPE_ATOMIC_OP, "ATOMIC_OP"},
    {FI_TYPE_EQ_EVENT, "EQ_EVENT"},
    {FI_TYPE_OP_TYPE, "OP_TYPE"},
    {FI_TYPE_COLLECTIVE_OP, "COLLECTIVE_OP"},
    {FI_TYPE_HMEM_IFACE, "HMEM_IFACE"},
    {FI_TYPE_CQ_FORMAT, "CQ_FORMAT"},
    {FI_TYPE_LOG_LEVEL, "LOG_LEVEL"},
    {FI_TYPE_LOG_SUBSYS, "LOG_SUBSYS"},
    {FI_TYPE_MR_MODE, "MR_MODE"},
};

static void print_scalars(void)
{
	static const uint64_t combos[] = {
	    0,
	    ~0ULL,
	    0x5555555555555555ULL,
	    0xaaaaaaaaaaaaaaaaULL,
	    0x1ff,
	    0x101ff,
	    0xffffffffULL,
	    0xffffffff00000000ULL,
	    (1ULL << 1) | (1ULL << 11) | (1ULL << 59),
	};
	static const int32_t odd_enums[] = {0x40000000, (int32_t)0x80000000u,
	                                    (int32_t)0x80000005u, INT_MAX, -1000};

	for (size_t t = 0; t < sizeof(flag_types) / sizeof(flag_types[0]); t++) {
		for (int bit = 0; bit < 64; bit++) {
			uint64_t v = 1ULL << bit;
			printf("%s bit %d: [%s]\n", flag_types[t].name, bit,
			       show(fi_tostr(&v, flag_types[t].type)));
		}
		for (size_t i = 0; i < sizeof(combos) / sizeof(combos[0]); i++)
			printf("%s %#" PRIx64 ": [%s]\n", flag_types[t].name, combos[i],
			       show(fi_tostr(&combos[i], flag_types[t].type)));
	}
	for (size_t t = 0; t < sizeof(enum_types) / sizeof(enum_types[0]); t++) {
		for (int32_t v = -3; v <= 40; v++)
			printf("%s %d: [%s]\n", enum_types[t].name, v,
			       show(fi_tostr(&v, enum_types[t].type)));
		for (size_t i = 0; i < sizeof(odd_enums) / sizeof(odd_enums[0]); i++)
			printf("%s %d: [%s]\n", enum_types[t].name, odd_enums[i],
			       show(fi_tostr(&odd_enums[i], enum_types[t].type)));
	}
	int dummy = 0;
	printf("VERSION: [%s]\n", show(fi_tostr(&dummy, FI_TYPE_VERSION)));
	printf("VERSION NULL: [%s]\n", show(fi_tostr(NULL, FI_TYPE_VERSION)));

	/* Types past the end of the enum, and every type with no data. */
	uint64_t zero = 0;
	for (int t = -2; t <= 40; t++) {
		if (t <= FI_TYPE_LOG_SUBSYS && t >= 0)
			continue;
		printf("type %d: [%s]\n", t, show(fi_tostr(&zero, (enum fi_type)t)));
	}
	printf("type 100000: [%s]\n", show(fi_tostr(&zero, (enum fi_type)100000)));
	for (int t = -2; t <= 40; t++)
		printf("type %d NULL: [%s]\n", t, show(fi_tostr(NULL, (enum fi_type)t)));
}

/* ---- structures ----------------------------------------------------------- */

/* A fid tostr following libfabric's convention: append to buf's text. */
static int append_tostr(const struct fid *fid, char *buf, size_t len)
{
	size_t used = strnlen(buf, len);

	if (used < len)
		snprintf(buf + used, len - used, "<fid class %zu>\n", fid->fclass);
	return 0;
}

static struct fi_ops *ops_with_tostr, *ops_short, *ops_no_tostr;

static struct fid *make_fid(size_t fclass, struct fi_ops *ops)
{
	struct fid *fid = arena_alloc(sizeof(*fid));

	fid->fclass = fclass;
	fid->context = NULL;
	fid->ops = ops;
	return fid;
}

static void make_ops(void)
{
	ops_with_tostr = arena_alloc(sizeof(struct fi_ops));
	ops_with_tostr->size = sizeof(struct fi_ops);
	ops_with_tostr->tostr = append_tostr;
	/* tostr set but outside the size the ops table claims */
	ops_short = arena_alloc(sizeof(struct fi_ops));
	ops_short->size = offsetof(struct fi_ops, tostr);
	ops_short->tostr = append_tostr;
	ops_no_tostr = arena_alloc(sizeof(struct fi_ops));
	ops_no_tostr->size = sizeof(struct fi_ops);
}

/* All caps but the two 1.17 does not print (see tostr_diff.sh), so that the
 * truncation runs below cut the same text on both libraries. */
#define CAPS_ALL_1_17_PRINTS (~(FI_AV_USER_ID | FI_PEER))

static struct fi_tx_attr tx_full = {
    .caps = CAPS_ALL_1_17_PRINTS,
    .mode = ~0ULL,
    .op_flags = ~0ULL,
    .msg_order = ~0ULL,
    .comp_order = ~0ULL,
    .inject_size = SIZE_MAX,
    .size = SIZE_MAX - 1,
    .iov_limit = SIZE_MAX - 2,
    .rma_iov_limit = SIZE_MAX - 3,
    .tclass = 0xffffffffu,
};
static struct fi_tx_attr tx_some = {
    .caps = FI_MSG | FI_SEND | FI_TAGGED,
    .mode = FI_CONTEXT,
    .op_flags = FI_COMPLETION | FI_INJECT_COMPLETE,
    .msg_order = FI_ORDER_SAS | FI_ORDER_RMA_WAW,
    .comp_order = LM_ORDER_NONE,
    .inject_size = 64,
    .size = 1024,
    .iov_limit = 4,
    .rma_iov_limit = 1,
    .tclass = 0x12,
};
static struct fi_rx_attr rx_full = {
    .caps = CAPS_ALL_1_17_PRINTS,
    .mode = ~0ULL,
    .op_flags = ~0ULL,
    .msg_order = ~0ULL,
    .comp_order = ~0ULL,
    .total_buffered_recv = SIZE_MAX,
    .size = SIZE_MAX - 5,
    .iov_limit = SIZE_MAX - 6,
};
static struct fi_rx_attr rx_some = {
    .caps = FI_MSG | FI_RECV | FI_DIRECTED_RECV,
    .mode = FI_CONTEXT2 | FI_RX_CQ_DATA,
    .op_flags = FI_MULTI_RECV,
    .msg_order = LM_ORDER_STRICT,
    .comp_order = LM_ORDER_DATA,
    .total_buffered_recv = 7,
    .size = 512,
    .iov_limit = 8,
};
static uint8_t auth_key[8] = {1, 2, 3, 4, 5, 6, 7, 8};
static struct fi_ep_attr ep_full = {
    .type = FI_EP_SOCK_DGRAM,
    .protocol = FI_PROTO_XNET,
    .protocol_version = 0xffffffffu,
    .max_msg_size = SIZE_MAX,
    .msg_prefix_size = SIZE_MAX - 1,
    .max_order_raw_size = SIZE_MAX - 2,
    .max_order_war_size = SIZE_MAX - 3,
    .max_order_waw_size = SIZE_MAX - 4,
    .mem_tag_format = 0xaaaaaaaaaaaaaaaaULL,
    .tx_ctx_cnt = SIZE_MAX - 5,
    .rx_ctx_cnt = SIZE_MAX - 6,
    .auth_key_size = SIZE_MAX - 8,
    .auth_key = auth_key,
};
static struct fi_ep_attr ep_odd = {
    .type = (enum fi_ep_type)77,
    .protocol = FI_PROV_SPECIFIC | 3,
    .mem_tag_format = 0x1,
};
static struct fi_domain_attr dom_full = {
    .domain = (struct fid_domain *)(uintptr_t)0xdeadbeef00ULL,
    .name = "domain-name",
    .threading = FI_THREAD_ENDPOINT,
    .control_progress = FI_PROGRESS_AUTO,
    .data_progress = FI_PROGRESS_MANUAL,
    .resource_mgmt = FI_RM_ENABLED,
    .av_type = FI_AV_MAP,
    .mr_mode = -1,
    .mr_key_size = SIZE_MAX - 1,
    .cq_data_size = SIZE_MAX - 2,
    .cq_cnt = SIZE_MAX - 3,
    .ep_cnt = SIZE_MAX - 4,
    .tx_ctx_cnt = SIZE_MAX - 5,
    .rx_ctx_cnt = SIZE_MAX - 6,
    .max_ep_tx_ctx = SIZE_MAX - 7,
    .max_ep_rx_ctx = SIZE_MAX - 8,
    .max_ep_stx_ctx = SIZE_MAX - 9,
    .max_ep_srx_ctx = SIZE_MAX - 10,
    .cntr_cnt = SIZE_MAX - 11,
    .mr_iov_limit = SIZE_MAX - 12,
    .caps = CAPS_ALL_1_17_PRINTS,
    .mode = ~0ULL,
    .auth_key = auth_key,
    .auth_key_size = SIZE_MAX - 8,
    .max_err_data = SIZE_MAX - 13,
    .mr_cnt = SIZE_MAX,
    .tclass = 0xab,
};
static struct fi_domain_attr dom_odd = {
    .threading = (enum fi_threading)9,
    .control_progress = (enum fi_progress)3,
    .data_progress = (enum fi_progress) - 1,
    .resource_mgmt = (enum fi_resource_mgmt)4,
    .av_type = (enum fi_av_type)3,
    .mr_mode = FI_MR_LOCAL | FI_MR_PROV_KEY,
};
static struct fi_fabric_attr fab_full = {
    .fabric = NULL,
    .name = "192.0.2.0/24",
    .prov_name = "tcp;ofi_rxm",
    .prov_version = FI_VERSION(117, 0),
    .api_version = FI_VERSION(1, 17),
};
static struct fi_fabric_attr fab_odd = {
    .prov_version = 0xffffffffu,
    .api_version = 0x12345678u,
};

static void print_attrs(void)
{
	static struct fi_tx_attr tx_zero;
	static struct fi_rx_attr rx_zero;
	static struct fi_ep_attr ep_zero;
	static struct fi_domain_attr dom_zero;
	static struct fi_fabric_attr fab_zero;

	printf("TX full:\n%s\n", show(fi_tostr(&tx_full, FI_TYPE_TX_ATTR)));
	printf("TX some:\n%s\n", show(fi_tostr(&tx_some, FI_TYPE_TX_ATTR)));
	printf("TX zero:\n%s\n", show(fi_tostr(&tx_zero, FI_TYPE_TX_ATTR)));
	printf("RX full:\n%s\n", show(fi_tostr(&rx_full, FI_TYPE_RX_ATTR)));
	printf("RX some:\n%s\n", show(fi_tostr(&rx_some, FI_TYPE_RX_ATTR)));
	printf("RX zero:\n%s\n", show(fi_tostr(&rx_zero, FI_TYPE_RX_ATTR)));
	printf("EP full:\n%s\n", show(fi_tostr(&ep_full, FI_TYPE_EP_ATTR)));
	printf("EP odd:\n%s\n", show(fi_tostr(&ep_odd, FI_TYPE_EP_ATTR)));
	printf("EP zero:\n%s\n", show(fi_tostr(&ep_zero, FI_TYPE_EP_ATTR)));
	printf("DOMAIN full:\n%s\n", show(fi_tostr(&dom_full, FI_TYPE_DOMAIN_ATTR)));
	printf("DOMAIN odd:\n%s\n", show(fi_tostr(&dom_odd, FI_TYPE_DOMAIN_ATTR)));
	printf("DOMAIN zero:\n%s\n", show(fi_tostr(&dom_zero, FI_TYPE_DOMAIN_ATTR)));
	printf("FABRIC full:\n%s\n", show(fi_tostr(&fab_full, FI_TYPE_FABRIC_ATTR)));
	printf("FABRIC odd:\n%s\n", show(fi_tostr(&fab_odd, FI_TYPE_FABRIC_ATTR)));
	printf("FABRIC zero:\n%s\n", show(fi_tostr(&fab_zero, FI_TYPE_FABRIC_ATTR)));

	/* Every field at its maximum: catches a field printed signed, or a
	 * value with a name of its own (FI_SHARED_CONTEXT). */
	struct fi_tx_attr tx_max;
	struct fi_rx_attr rx_max;
	struct fi_ep_attr ep_max;
	struct fi_domain_attr dom_max;
	struct fi_fabric_attr fab_max;
	memset(&tx_max, 0xff, sizeof(tx_max));
	memset(&rx_max, 0xff, sizeof(rx_max));
	memset(&ep_max, 0xff, sizeof(ep_max));
	memset(&dom_max, 0xff, sizeof(dom_max));
	memset(&fab_max, 0xff, sizeof(fab_max));
	ep_max.auth_key = NULL;
	dom_max.name = "max";
	dom_max.auth_key = NULL;
	fab_max.fabric = NULL;
	fab_max.name = fab_max.prov_name = "max";
	printf("TX max:\n%s\n", show(fi_tostr(&tx_max, FI_TYPE_TX_ATTR)));
	printf("RX max:\n%s\n", show(fi_tostr(&rx_max, FI_TYPE_RX_ATTR)));
	printf("EP max:\n%s\n", show(fi_tostr(&ep_max, FI_TYPE_EP_ATTR)));
	printf("DOMAIN max:\n%s\n", show(fi_tostr(&dom_max, FI_TYPE_DOMAIN_ATTR)));
	printf("FABRIC max:\n%s\n", show(fi_tostr(&fab_max, FI_TYPE_FABRIC_ATTR)));
	ep_max.tx_ctx_cnt = SIZE_MAX - 1;
	ep_max.rx_ctx_cnt = 0;
	printf("EP ctx counts not shared:\n%s\n",
	       show(fi_tostr(&ep_max, FI_TYPE_EP_ATTR)));
}

/* An fi_info built by hand (no fi_allocinfo, which would need loom's
 * fi_dupinfo) with every sub-structure present. */
static struct fi_info *make_info(void)
{
	struct fi_info *info = calloc(1, sizeof(*info));

	if (!info)
		exit(2);
	info->caps = FI_MSG | FI_RMA | FI_TAGGED | FI_READ | FI_WRITE | FI_RECV |
	             FI_SEND | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_MULTI_RECV |
	             FI_LOCAL_COMM | FI_REMOTE_COMM;
	info->mode = FI_CONTEXT | FI_MSG_PREFIX;
	info->tx_attr = &tx_some;
	info->rx_attr = &rx_some;
	info->ep_attr = &ep_full;
	info->domain_attr = &dom_full;
	info->fabric_attr = &fab_full;
	return info;
}

/* Address bytes laid out like the sockaddr or provider address each format
 * names, filled with a pattern so every field read shows up. */
static void print_addresses(struct fi_info *info)
{
	static const uint16_t families[] = {0, 1, 2, 10, 27, 0xffff};
	uint8_t *pattern = arena_alloc(128);
	uint8_t *zeros = arena_alloc(128);
	char *str = arena_alloc(3000);

	for (int i = 0; i < 128; i++)
		pattern[i] = (uint8_t)(0x10 + i * 7);
	memset(zeros, 0, 128);
	memset(str, 's', 2999);
	memcpy(str, "fi_str://", 9);
	str[2999] = '\0';

	for (uint32_t fmt = 0; fmt <= 17; fmt++) {
		for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
			memcpy(pattern, &families[f], 2);
			info->addr_format = fmt;
			info->src_addr =
			    fmt == FI_ADDR_STR ? (void *)str : (void *)pattern;
			info->dest_addr = zeros;
			info->src_addrlen = 128;
			info->dest_addrlen = 16;
			printf("INFO addr_format %u family %u:\n%s\n", fmt, families[f],
			       show(fi_tostr(info, FI_TYPE_INFO)));
			if (fmt != FI_SOCKADDR && fmt != FI_SOCKADDR_IN &&
			    fmt != FI_SOCKADDR_IN6)
				break; /* the family only matters to these */
		}
	}
	/* One byte at a time, to pin each field's offset. */
	for (uint32_t fmt = FI_SOCKADDR_IB; fmt <= FI_ADDR_CXI; fmt++) {
		if (fmt == FI_ADDR_STR || fmt == FI_ADDR_BGQ || fmt == FI_ADDR_MLX)
			continue;
		for (int k = 0; k < 64; k++) {
			memset(zeros, 0, 128);
			zeros[k] = 0xff;
			struct fi_info one = {.addr_format = fmt, .src_addr = zeros};
			const char *s = fi_tostr(&one, FI_TYPE_INFO);
			const char *line = s ? strstr(s, "src_addr:") : NULL;
			printf("addr fmt %u byte %d: %.*s\n", fmt, k,
			       line ? (int)strcspn(line, "\n") : 6,
			       line ? line : "<NULL>");
		}
	}
	/* BGQ and MLX print the pointer only, never what it points at. */
	info->addr_format = FI_ADDR_BGQ;
	info->src_addr = (void *)(uintptr_t)0x1000;
	info->dest_addr = (void *)(uintptr_t)0x10;
	printf("INFO bgq fake pointers:\n%s\n", show(fi_tostr(info, FI_TYPE_INFO)));
	info->addr_format = FI_ADDR_MLX;
	printf("INFO mlx fake pointers:\n%s\n", show(fi_tostr(info, FI_TYPE_INFO)));
	info->src_addr = info->dest_addr = NULL;
}

static void print_fids(struct fi_info *info)
{
	struct fid *plain = make_fid(FI_CLASS_EP, NULL);
	struct fid *with = make_fid(FI_CLASS_DOMAIN, ops_with_tostr);
	struct fid *shortops = make_fid(FI_CLASS_CQ, ops_short);
	struct fid *without = make_fid(FI_CLASS_EQ, ops_no_tostr);
	struct fid_nic *nic = arena_alloc(sizeof(*nic));

	memset(nic, 0, sizeof(*nic));
	nic->fid.fclass = FI_CLASS_NIC;

	printf("FID plain: [%s]\n", show(fi_tostr(plain, FI_TYPE_FID)));
	printf("FID with tostr: [%s]\n", show(fi_tostr(with, FI_TYPE_FID)));
	printf("FID short ops: [%s]\n", show(fi_tostr(shortops, FI_TYPE_FID)));
	printf("FID no tostr: [%s]\n", show(fi_tostr(without, FI_TYPE_FID)));
	printf("FID nic: [%s]\n", show(fi_tostr(nic, FI_TYPE_FID)));

	info->handle = plain;
	info->nic = nic;
	printf("INFO plain handle, nic without ops:\n%s\n",
	       show(fi_tostr(info, FI_TYPE_INFO)));
	info->handle = with;
	nic->fid.ops = ops_with_tostr;
	printf("INFO handle and nic with tostr:\n%s\n",
	       show(fi_tostr(info, FI_TYPE_INFO)));
	info->handle = shortops;
	nic->fid.ops = ops_short;
	printf("INFO short ops:\n%s\n", show(fi_tostr(info, FI_TYPE_INFO)));
}

static void print_info_variants(struct fi_info *info)
{
	struct fi_info *empty = calloc(1, sizeof(*empty));

	if (!empty)
		exit(2);
	printf("INFO empty:\n%s\n", show(fi_tostr(empty, FI_TYPE_INFO)));
	/* Only the first of a list is printed. */
	empty->next = info;
	printf("INFO list head:\n%s\n", show(fi_tostr(empty, FI_TYPE_INFO)));

	info->handle = NULL;
	info->nic = NULL;
	info->tx_attr = &tx_full;
	info->rx_attr = &rx_full;
	info->ep_attr = &ep_odd;
	info->domain_attr = &dom_odd;
	info->fabric_attr = &fab_odd;
	info->caps = CAPS_ALL_1_17_PRINTS;
	info->mode = ~0ULL;
	info->src_addrlen = SIZE_MAX;
	info->dest_addrlen = SIZE_MAX - 1;
	printf("INFO full flags:\n%s\n", show(fi_tostr(info, FI_TYPE_INFO)));
	info->tx_attr = NULL;
	info->domain_attr = NULL;
	printf("INFO some attrs missing:\n%s\n", show(fi_tostr(info, FI_TYPE_INFO)));
	free(empty);
}

/* ---- truncation ----------------------------------------------------------- */

static uint32_t fnv1a(const char *s, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

/* Every buffer length from 0 to past the full text: what was returned, how
 * long the text is, how many bytes were written (guard pattern) and a hash
 * of the text, compact enough to diff. */
static void print_truncation(const char *what, const void *data, enum fi_type type)
{
	const char *full = fi_tostr(data, type);
	size_t full_len = full ? strlen(full) : 0;
	size_t size = full_len + 4;
	char *buf = malloc(size + 16);

	if (!buf)
		exit(2);
	for (size_t len = 0; len <= full_len + 3; len++) {
		memset(buf, 0x5a, size + 16);
		char *r = fi_tostr_r(buf, len, data, type);
		size_t touched = size + 16;
		while (touched > 0 && (uint8_t)buf[touched - 1] == 0x5a)
			touched--;
		size_t n = r ? strnlen(buf, size + 16) : 0;
		printf("trunc %s len %zu: ret %s strlen %zu touched %zu hash %08x\n",
		       what, len,
		       r == buf ? "buf"
		       : r      ? "other"
		                : "NULL",
		       n, touched, fnv1a(buf, n));
	}
	free(buf);
}

static void print_truncations(struct fi_info *info)
{
	uint64_t caps = FI_MSG | FI_RMA | FI_TAGGED | FI_HMEM;
	uint64_t order = 0x1ff | LM_ORDER_DATA;
	int ep = FI_EP_RDM;
	int junk = 0;
	char *buf = malloc(64);

	if (!buf)
		exit(2);
	print_truncation("caps", &caps, FI_TYPE_CAPS);
	print_truncation("msg_order", &order, FI_TYPE_MSG_ORDER);
	print_truncation("ep_type", &ep, FI_TYPE_EP_TYPE);
	print_truncation("version", &junk, FI_TYPE_VERSION);
	print_truncation("unknown type", &junk, (enum fi_type)77);
	print_truncation("tx_attr", &tx_full, FI_TYPE_TX_ATTR);
	print_truncation("rx_attr", &rx_some, FI_TYPE_RX_ATTR);
	print_truncation("domain_attr", &dom_full, FI_TYPE_DOMAIN_ATTR);
	info->handle = make_fid(FI_CLASS_EP, ops_with_tostr);
	info->addr_format = FI_SOCKADDR_IN;
	info->src_addr = NULL;
	print_truncation("info", info, FI_TYPE_INFO);
	info->handle = NULL;

	memset(buf, 0x5a, 64);
	printf("tostr_r NULL buf: %s\n",
	       fi_tostr_r(NULL, 64, &caps, FI_TYPE_CAPS) ? "buf" : "NULL");
	printf("tostr_r NULL data: %s first byte %#x\n",
	       fi_tostr_r(buf, 64, NULL, FI_TYPE_CAPS) ? "buf" : "NULL", (uint8_t)buf[0]);
	free(buf);

	/* fi_tostr's own buffer: where a long text is cut. */
	struct fi_fabric_attr big = fab_full;
	char *name = malloc(20000);
	if (!name)
		exit(2);
	memset(name, 'n', 19999);
	name[19999] = '\0';
	big.name = name;
	const char *s = fi_tostr(&big, FI_TYPE_FABRIC_ATTR);
	printf("fi_tostr long text: strlen %zu hash %08x\n", strlen(s),
	       fnv1a(s, strlen(s)));
	printf("fi_tostr same buffer twice: %s\n",
	       fi_tostr(&caps, FI_TYPE_CAPS) == fi_tostr(&ep, FI_TYPE_EP_TYPE) ? "yes"
	                                                                       : "no");
	free(name);
}

static void report_library(void)
{
	Dl_info dl;

	if (dladdr((void *)fi_tostr, &dl) && dl.dli_fname)
		fprintf(stderr, "tostr_diff: fi_tostr from %s\n", dl.dli_fname);
	else
		fprintf(stderr, "tostr_diff: fi_tostr from <unknown>\n");
}

int main(void)
{
	arena = mmap(ARENA_ADDR, ARENA_SIZE, PROT_READ | PROT_WRITE,
	             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (arena != ARENA_ADDR) {
		fprintf(stderr, "tostr_diff: cannot map the arena at %p\n", ARENA_ADDR);
		return 2;
	}
	report_library();
	make_ops();

	struct fi_info *info = make_info();

	print_strerror();
	print_scalars();
	print_attrs();
	print_addresses(info);
	print_fids(info);
	print_info_variants(info);
	print_truncations(info);
	free(info);
	return 0;
}
