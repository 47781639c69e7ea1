/* tostr.c - fi_tostr / fi_tostr_r: exact text for flags, enums, attribute
 * structures and fi_info, and safe behaviour on bad input and short buffers. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_trigger.h>
#include <rdma/providers/fi_log.h>

#include "check.h"
#include "v1_names.h"

static void expect_str(const char *what, const char *got, const char *want)
{
	check_count++;
	if (!want && !got)
		return;
	if (!want || !got || strcmp(got, want) != 0) {
		check_failures++;
		fprintf(stderr, "FAIL %s:\n  got:  %s%s%s\n  want: %s%s%s\n", what,
		        got ? "\"" : "", got ? got : "NULL", got ? "\"" : "",
		        want ? "\"" : "", want ? want : "NULL", want ? "\"" : "");
	}
}

static void expect_true(const char *what, int ok)
{
	check_count++;
	if (!ok) {
		check_failures++;
		fprintf(stderr, "FAIL %s\n", what);
	}
}

static void expect_u64(const char *what, uint64_t v, enum fi_type type, const char *want)
{
	expect_str(what, fi_tostr(&v, type), want);
}

static void expect_int(const char *what, int v, enum fi_type type, const char *want)
{
	expect_str(what, fi_tostr(&v, type), want);
}

/* ---- flags and enums (texts observed from libfabric 1.17) ---------------- */

static void check_flags(void)
{
	expect_u64("caps", FI_MSG | FI_RMA | FI_TAGGED, FI_TYPE_CAPS,
	           "FI_MSG, FI_RMA, FI_TAGGED");
	expect_u64("caps none", 0, FI_TYPE_CAPS, "");
	expect_u64(
	    "caps all", ~0ULL, FI_TYPE_CAPS,
	    "FI_MSG, FI_RMA, FI_TAGGED, FI_ATOMIC, FI_MULTICAST, FI_COLLECTIVE, "
	    "FI_READ, FI_WRITE, FI_RECV, FI_SEND, FI_REMOTE_READ, FI_REMOTE_WRITE, "
	    "FI_MULTI_RECV, FI_REMOTE_CQ_DATA, FI_TRIGGER, FI_FENCE, FI_VARIABLE_MSG, "
	    "FI_RMA_PMEM, FI_SOURCE_ERR, FI_LOCAL_COMM, FI_REMOTE_COMM, FI_SHARED_AV, "
	    "FI_RMA_EVENT, FI_SOURCE, FI_NAMED_RX_CTX, FI_DIRECTED_RECV, FI_AV_USER_ID, "
	    "FI_PEER, FI_HMEM");
	/* bits that are not capabilities are left out */
	expect_u64("caps non-cap bits", FI_MORE | FI_INJECT | (1ULL << 63), FI_TYPE_CAPS,
	           "");
	expect_u64("op_flags all", ~0ULL, FI_TYPE_OP_FLAGS,
	           "FI_MULTICAST, FI_MULTI_RECV, FI_REMOTE_CQ_DATA, FI_MORE, FI_PEEK, "
	           "FI_TRIGGER, FI_FENCE, FI_COMPLETION, FI_INJECT, FI_INJECT_COMPLETE, "
	           "FI_TRANSMIT_COMPLETE, FI_DELIVERY_COMPLETE, FI_MATCH_COMPLETE, "
	           "FI_AFFINITY, FI_CLAIM, FI_DISCARD");
	expect_u64("op_flags", FI_INJECT | FI_COMPLETION, FI_TYPE_OP_FLAGS,
	           "FI_COMPLETION, FI_INJECT");
	expect_u64("msg_order", FI_ORDER_SAS | FI_ORDER_RAR | FI_ORDER_ATOMIC_WAW,
	           FI_TYPE_MSG_ORDER, "FI_ORDER_RAR, FI_ORDER_SAS, FI_ORDER_ATOMIC_WAW");
	expect_u64("msg_order none", 0, FI_TYPE_MSG_ORDER, "");
	expect_u64(
	    "mode all", ~0ULL, FI_TYPE_MODE,
	    "FI_CONTEXT, FI_MSG_PREFIX, FI_ASYNC_IOV, FI_RX_CQ_DATA, FI_LOCAL_MR, "
	    "FI_NOTIFY_FLAGS_ONLY, FI_RESTRICTED_COMP, FI_CONTEXT2, FI_BUFFERED_RECV");
	expect_u64("cq event flags all", ~0ULL, FI_TYPE_CQ_EVENT_FLAGS,
	           "FI_SEND, FI_RECV, FI_RMA, FI_ATOMIC, FI_MSG, FI_TAGGED, FI_READ, "
	           "FI_WRITE, FI_REMOTE_READ, FI_REMOTE_WRITE, FI_REMOTE_CQ_DATA, "
	           "FI_MULTI_RECV, FI_MORE, FI_CLAIM");
	expect_int("mr_mode", FI_MR_LOCAL | FI_MR_VIRT_ADDR, FI_TYPE_MR_MODE,
	           "FI_MR_LOCAL, FI_MR_VIRT_ADDR");
	expect_int(
	    "mr_mode all", -1, FI_TYPE_MR_MODE,
	    "FI_MR_BASIC, FI_MR_SCALABLE, FI_MR_LOCAL, FI_MR_RAW, FI_MR_VIRT_ADDR, "
	    "FI_MR_ALLOCATED, FI_MR_PROV_KEY, FI_MR_MMU_NOTIFY, FI_MR_RMA_EVENT, "
	    "FI_MR_ENDPOINT, FI_MR_HMEM, FI_MR_COLLECTIVE");
}

static void check_enums(void)
{
	expect_int("ep_type", FI_EP_RDM, FI_TYPE_EP_TYPE, "FI_EP_RDM");
	expect_int("ep_type 6", 6, FI_TYPE_EP_TYPE, "Unknown");
	expect_int("ep_type -1", -1, FI_TYPE_EP_TYPE, "Unknown");
	expect_int("addr_format", FI_SOCKADDR_IN6, FI_TYPE_ADDR_FORMAT,
	           "FI_SOCKADDR_IN6");
	expect_int("addr_format cxi", FI_ADDR_CXI, FI_TYPE_ADDR_FORMAT, "FI_ADDR_CXI");
	expect_int("addr_format 16", 16, FI_TYPE_ADDR_FORMAT, "Unknown");
	expect_int("addr_format prov", (int)(FI_PROV_SPECIFIC | 2), FI_TYPE_ADDR_FORMAT,
	           "Provider specific");
	expect_int("threading", FI_THREAD_COMPLETION, FI_TYPE_THREADING,
	           "FI_THREAD_COMPLETION");
	expect_int("progress", FI_PROGRESS_MANUAL, FI_TYPE_PROGRESS,
	           "FI_PROGRESS_MANUAL");
	expect_int("progress 3", 3, FI_TYPE_PROGRESS, "Unknown");
	expect_int("protocol", FI_PROTO_XNET, FI_TYPE_PROTOCOL, "FI_PROTO_XNET");
	expect_int("protocol mxm", 7, FI_TYPE_PROTOCOL, "Unknown");
	expect_int("protocol mrail", 17, FI_TYPE_PROTOCOL, "Unknown");
	expect_int("protocol 0x40000000", 0x40000000, FI_TYPE_PROTOCOL, "Unknown");
	expect_int("protocol prov", -1, FI_TYPE_PROTOCOL, "Provider specific");
	expect_int("av_type", FI_AV_TABLE, FI_TYPE_AV_TYPE, "FI_AV_TABLE");
	expect_int("atomic type", FI_LONG_DOUBLE_COMPLEX, FI_TYPE_ATOMIC_TYPE,
	           "FI_LONG_DOUBLE_COMPLEX");
	expect_int("atomic type 16", 16, FI_TYPE_ATOMIC_TYPE, "Unknown");
	expect_int("atomic op", FI_MSWAP, FI_TYPE_ATOMIC_OP, "FI_MSWAP");
	expect_int("atomic op read", FI_ATOMIC_READ, FI_TYPE_ATOMIC_OP, "FI_ATOMIC_READ");
	expect_int("eq event", FI_JOIN_COMPLETE, FI_TYPE_EQ_EVENT, "FI_JOIN_COMPLETE");
	expect_int("eq event 7", 7, FI_TYPE_EQ_EVENT, "Unknown");
	expect_int("op type", FI_OP_CNTR_ADD, FI_TYPE_OP_TYPE, "FI_OP_CNTR_ADD");
	expect_int("collective", FI_GATHER, FI_TYPE_COLLECTIVE_OP, "FI_GATHER");
	expect_int("hmem", FI_HMEM_SYNAPSEAI, FI_TYPE_HMEM_IFACE, "FI_HMEM_SYNAPSEAI");
	expect_int("cq format", FI_CQ_FORMAT_TAGGED, FI_TYPE_CQ_FORMAT,
	           "FI_CQ_FORMAT_TAGGED");
	expect_int("log level", FI_LOG_DEBUG, FI_TYPE_LOG_LEVEL, "debug");
	expect_int("log level 4", 4, FI_TYPE_LOG_LEVEL, "Unknown");
	expect_int("log subsys", FI_LOG_EP_CTRL, FI_TYPE_LOG_SUBSYS, "ep_ctrl");
	expect_int("log subsys", FI_LOG_CNTR, FI_TYPE_LOG_SUBSYS, "cntr");
	expect_int("version", 0, FI_TYPE_VERSION, "2.6.0");
}

/* ---- structures ---------------------------------------------------------- */

static uint8_t key[4] = {1, 2, 3, 0xab};
static struct fi_tx_attr tx = {FI_MSG | FI_SEND,
                               FI_CONTEXT,
                               FI_INJECT | FI_COMPLETION,
                               FI_ORDER_SAS,
                               LM_ORDER_STRICT,
                               64,
                               1024,
                               4,
                               2,
                               0x12};
static struct fi_rx_attr rx = {
    FI_MSG | FI_RECV, FI_CONTEXT2, FI_MULTI_RECV, FI_ORDER_SAS | FI_ORDER_RAR,
    LM_ORDER_NONE,    7,           512,           8};
static struct fi_ep_attr ep = {FI_EP_RDM, FI_PROTO_SHM, 3, 1 << 20, 0, 100, 200,
                               300,       0xaaaa,       1, 2,       4, key};
static struct fi_fabric_attr fab = {NULL, "fname", "prov", FI_VERSION(3, 4),
                                    FI_VERSION(1, 5)};

static const char tx_text[] = "fi_tx_attr:\n"
                              "    caps: [ FI_MSG, FI_SEND ]\n"
                              "    mode: [ FI_CONTEXT ]\n"
                              "    op_flags: [ FI_COMPLETION, FI_INJECT ]\n"
                              "    msg_order: [ FI_ORDER_SAS ]\n"
                              "    comp_order: [ FI_ORDER_STRICT ]\n"
                              "    inject_size: 64\n"
                              "    size: 1024\n"
                              "    iov_limit: 4\n"
                              "    rma_iov_limit: 2\n"
                              "    tclass: 0x12\n";

static const char fab_text[] = "fi_fabric_attr:\n"
                               "    name: fname\n"
                               "    prov_name: prov\n"
                               "    prov_version: 3.4\n"
                               "    api_version: 1.5\n";

static void fill_domain(struct fi_domain_attr *dom)
{
	memset(dom, 0, sizeof(*dom));
	dom->domain = (struct fid_domain *)(uintptr_t)0x1234;
	dom->name = "dname";
	dom->threading = FI_THREAD_DOMAIN;
	dom->control_progress = FI_PROGRESS_MANUAL;
	dom->data_progress = FI_PROGRESS_AUTO;
	dom->resource_mgmt = FI_RM_DISABLED;
	dom->av_type = FI_AV_TABLE;
	dom->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR;
	dom->mr_key_size = 8;
	dom->cq_data_size = 4;
	dom->cq_cnt = 1;
	dom->ep_cnt = 2;
	dom->tx_ctx_cnt = 3;
	dom->rx_ctx_cnt = 4;
	dom->max_ep_tx_ctx = 5;
	dom->max_ep_rx_ctx = 6;
	dom->max_ep_stx_ctx = 7;
	dom->max_ep_srx_ctx = 8;
	dom->cntr_cnt = 9;
	dom->mr_iov_limit = 10;
	dom->caps = FI_LOCAL_COMM;
	dom->mode = FI_RESTRICTED_COMP;
	dom->auth_key = key;
	dom->auth_key_size = 3;
	dom->max_err_data = 11;
	dom->mr_cnt = 12;
	dom->tclass = 0xff;
}

static const char info_text[] = "fi_info:\n"
                                "    caps: [ FI_MSG, FI_TAGGED ]\n"
                                "    mode: [ FI_CONTEXT ]\n"
                                "    addr_format: FI_SOCKADDR_IN\n"
                                "    src_addrlen: 16\n"
                                "    dest_addrlen: 28\n"
                                "    src_addr: fi_sockaddr_in://10.1.2.3:4711\n"
                                "    dest_addr: fi_sockaddr_in://0:0:fe80:::99\n"
                                "    handle: (nil)\n"
                                "    fi_tx_attr:\n"
                                "        caps: [ FI_MSG, FI_SEND ]\n"
                                "        mode: [ FI_CONTEXT ]\n"
                                "        op_flags: [ FI_COMPLETION, FI_INJECT ]\n"
                                "        msg_order: [ FI_ORDER_SAS ]\n"
                                "        comp_order: [ FI_ORDER_STRICT ]\n"
                                "        inject_size: 64\n"
                                "        size: 1024\n"
                                "        iov_limit: 4\n"
                                "        rma_iov_limit: 2\n"
                                "        tclass: 0x12\n"
                                "    fi_rx_attr:\n"
                                "        caps: [ FI_MSG, FI_RECV ]\n"
                                "        mode: [ FI_CONTEXT2 ]\n"
                                "        op_flags: [ FI_MULTI_RECV ]\n"
                                "        msg_order: [ FI_ORDER_RAR, FI_ORDER_SAS ]\n"
                                "        comp_order: [ FI_ORDER_NONE ]\n"
                                "        total_buffered_recv: 7\n"
                                "        size: 512\n"
                                "        iov_limit: 8\n"
                                "    fi_ep_attr:\n"
                                "        type: FI_EP_RDM\n"
                                "        protocol: FI_PROTO_SHM\n"
                                "        protocol_version: 3\n"
                                "        max_msg_size: 1048576\n"
                                "        msg_prefix_size: 0\n"
                                "        max_order_raw_size: 100\n"
                                "        max_order_war_size: 200\n"
                                "        max_order_waw_size: 300\n"
                                "        mem_tag_format: 0x000000000000aaaa\n"
                                "        tx_ctx_cnt: 1\n"
                                "        rx_ctx_cnt: 2\n"
                                "        auth_key_size: 4\n"
                                "    fi_domain_attr:\n"
                                "        domain: 0x1234\n"
                                "        name: dname\n"
                                "        threading: FI_THREAD_DOMAIN\n"
                                "        control_progress: FI_PROGRESS_MANUAL\n"
                                "        data_progress: FI_PROGRESS_AUTO\n"
                                "        resource_mgmt: FI_RM_DISABLED\n"
                                "        av_type: FI_AV_TABLE\n"
                                "        mr_mode: [ FI_MR_LOCAL, FI_MR_VIRT_ADDR ]\n"
                                "        mr_key_size: 8\n"
                                "        cq_data_size: 4\n"
                                "        cq_cnt: 1\n"
                                "        ep_cnt: 2\n"
                                "        tx_ctx_cnt: 3\n"
                                "        rx_ctx_cnt: 4\n"
                                "        max_ep_tx_ctx: 5\n"
                                "        max_ep_rx_ctx: 6\n"
                                "        max_ep_stx_ctx: 7\n"
                                "        max_ep_srx_ctx: 8\n"
                                "        cntr_cnt: 9\n"
                                "        mr_iov_limit: 10\n"
                                "        caps: [ FI_LOCAL_COMM ]\n"
                                "        mode: [ FI_RESTRICTED_COMP ]\n"
                                "        auth_key_size: 3\n"
                                "        max_err_data: 11\n"
                                "        mr_cnt: 12\n"
                                "        tclass: 0xff\n"
                                "    fi_fabric_attr:\n"
                                "        name: fname\n"
                                "        prov_name: prov\n"
                                "        prov_version: 3.4\n"
                                "        api_version: 1.5\n"
                                "    nic: (nil)\n";

static const char empty_info_text[] = "fi_info:\n"
                                      "    caps: [  ]\n"
                                      "    mode: [  ]\n"
                                      "    addr_format: FI_FORMAT_UNSPEC\n"
                                      "    src_addrlen: 0\n"
                                      "    dest_addrlen: 0\n"
                                      "    src_addr: (null)\n"
                                      "    dest_addr: (null)\n"
                                      "    handle: (nil)\n"
                                      "    fi_tx_attr: (null)\n"
                                      "    fi_rx_attr: (null)\n"
                                      "    fi_ep_attr: (null)\n"
                                      "    fi_domain_attr: (null)\n"
                                      "    fi_fabric_attr: (null)\n"
                                      "    nic: (nil)\n";

static void check_structs(void)
{
	struct fi_domain_attr dom;
	struct sockaddr_in sin = {0};
	struct sockaddr_in6 sin6 = {0};
	struct fi_info info = {0};
	struct fi_fabric_attr nulls = {0};

	fill_domain(&dom);
	expect_str("tx_attr", fi_tostr(&tx, FI_TYPE_TX_ATTR), tx_text);
	expect_str("fabric_attr", fi_tostr(&fab, FI_TYPE_FABRIC_ATTR), fab_text);
	expect_str("fabric_attr NULL strings", fi_tostr(&nulls, FI_TYPE_FABRIC_ATTR),
	           "fi_fabric_attr:\n"
	           "    name: (null)\n"
	           "    prov_name: (null)\n"
	           "    prov_version: 0.0\n"
	           "    api_version: 0.0\n");
	expect_str("ep_attr odd enums",
	           fi_tostr(&(struct fi_ep_attr){.type = (enum fi_ep_type)9,
	                                         .protocol = FI_PROV_SPECIFIC,
	                                         .protocol_version = 0xffffffffu},
	                    FI_TYPE_EP_ATTR),
	           "fi_ep_attr:\n"
	           "    type: Unknown\n"
	           "    protocol: Provider specific\n"
	           "    protocol_version: -1\n"
	           "    max_msg_size: 0\n"
	           "    msg_prefix_size: 0\n"
	           "    max_order_raw_size: 0\n"
	           "    max_order_war_size: 0\n"
	           "    max_order_waw_size: 0\n"
	           "    mem_tag_format: 0x0000000000000000\n"
	           "    tx_ctx_cnt: 0\n"
	           "    rx_ctx_cnt: 0\n"
	           "    auth_key_size: 0\n");

	struct fi_ep_attr shared = {.tx_ctx_cnt = FI_SHARED_CONTEXT,
	                            .rx_ctx_cnt = FI_SHARED_CONTEXT};
	const char *s = fi_tostr(&shared, FI_TYPE_EP_ATTR);
	expect_true("ep_attr names FI_SHARED_CONTEXT",
	            s && strstr(s, "    tx_ctx_cnt: FI_SHARED_CONTEXT\n"
	                           "    rx_ctx_cnt: FI_SHARED_CONTEXT\n"));

	sin.sin_family = AF_INET;
	sin.sin_port = htons(4711);
	inet_pton(AF_INET, "10.1.2.3", &sin.sin_addr);
	/* An IPv6 sockaddr under FI_SOCKADDR_IN is read as the format says. */
	sin6.sin6_family = AF_INET6;
	sin6.sin6_port = htons(99);
	inet_pton(AF_INET6, "fe80::1", &sin6.sin6_addr);

	info.caps = FI_MSG | FI_TAGGED;
	info.mode = FI_CONTEXT;
	info.addr_format = FI_SOCKADDR_IN;
	info.src_addrlen = sizeof(sin);
	info.dest_addrlen = sizeof(sin6);
	info.src_addr = &sin;
	info.dest_addr = &sin6;
	info.tx_attr = &tx;
	info.rx_attr = &rx;
	info.ep_attr = &ep;
	info.domain_attr = &dom;
	info.fabric_attr = &fab;
	expect_str("fi_info", fi_tostr(&info, FI_TYPE_INFO), info_text);

	struct fi_info empty = {0};
	expect_str("empty fi_info", fi_tostr(&empty, FI_TYPE_INFO), empty_info_text);
	/* Only the first fi_info of a list is printed. */
	empty.next = &info;
	expect_str("fi_info list", fi_tostr(&empty, FI_TYPE_INFO), empty_info_text);

	/* Address texts per format. */
	struct fi_info one = {0};
	char line[256];
	uint64_t words[4] = {0x1122334455667788ULL, 0x99aabbccddeeff00ULL, 3, 4};
	const struct {
		uint32_t format;
		const void *addr;
		const char *want;
	} addrs[] = {
	    {FI_SOCKADDR, &sin6, "    src_addr: fi_sockaddr_in6://[fe80::1]:99"},
	    {FI_SOCKADDR_IN6, &sin6, "    src_addr: fi_sockaddr_in6://[fe80::1]:99"},
	    {FI_ADDR_PSMX, words, "    src_addr: fi_addr_psmx://1122334455667788"},
	    {FI_ADDR_PSMX2, words,
	     "    src_addr: fi_addr_psmx2://1122334455667788:99aabbccddeeff00"},
	    {FI_ADDR_PSMX3, words,
	     "    src_addr: fi_addr_psmx3://1122334455667788:99aabbccddeeff00:3:4"},
	    {FI_ADDR_OPX, &words[2], "    src_addr: fi_addr_opx://0000000000000003"},
	    {FI_ADDR_CXI, &words[3], "    src_addr: fi_addr_cxi://0x00000004"},
	    {FI_ADDR_STR, "fi_shm://8849", "    src_addr: fi_shm://8849"},
	    {FI_FORMAT_UNSPEC, &sin, "    src_addr: "},
	    {FI_PROV_SPECIFIC, &sin, "    src_addr: "},
	};
	for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
		one.addr_format = addrs[i].format;
		one.src_addr = (void *)addrs[i].addr;
		s = fi_tostr(&one, FI_TYPE_INFO);
		const char *l = s ? strstr(s, "    src_addr:") : NULL;
		snprintf(line, sizeof(line), "%.*s", l ? (int)strcspn(l, "\n") : 0,
		         l ? l : "");
		char what[64];
		snprintf(what, sizeof(what), "address format %u", addrs[i].format);
		expect_str(what, line, addrs[i].want);
	}
}

/* ---- fids ---------------------------------------------------------------- */

/* libfabric's convention: a fid's tostr appends to the text in buf. */
static int append_tostr(const struct fid *fid, char *buf, size_t len)
{
	size_t used = strnlen(buf, len);

	if (used < len)
		snprintf(buf + used, len - used, "<class %zu>\n", fid->fclass);
	return 0;
}

static void check_fids(void)
{
	struct fi_ops ops = {.size = sizeof(ops), .tostr = append_tostr};
	struct fid plain = {.fclass = FI_CLASS_EP};
	struct fid with = {.fclass = FI_CLASS_DOMAIN, .ops = &ops};
	char want[64];

	snprintf(want, sizeof(want), "fid: %p\n", (void *)&plain);
	expect_str("fid without ops", fi_tostr(&plain, FI_TYPE_FID), want);
	expect_str("fid with tostr", fi_tostr(&with, FI_TYPE_FID), "<class 2>\n");

	struct fi_info info = {0};
	info.handle = &with;
	const char *s = fi_tostr(&info, FI_TYPE_INFO);
	expect_true(
	    "fi_info handle described by its tostr, without label",
	    s && strstr(s, "    dest_addr: (null)\n<class 2>\n    fi_tx_attr: (null)\n"));
	info.handle = &plain;
	snprintf(want, sizeof(want), "    handle: %p\n", (void *)&plain);
	s = fi_tostr(&info, FI_TYPE_INFO);
	expect_true("fi_info handle without tostr printed as a pointer",
	            s && strstr(s, want));
}

/* ---- bad input and short buffers ----------------------------------------- */

#define GUARD 0x5a

static void check_bad_input(void)
{
	uint64_t caps = FI_MSG | FI_RMA | FI_TAGGED;
	char buf[64];
	char what[64];

	expect_str("NULL data", fi_tostr(NULL, FI_TYPE_CAPS), NULL);
	expect_str("NULL info", fi_tostr(NULL, FI_TYPE_INFO), NULL);
	expect_str("NULL data, version", fi_tostr(NULL, FI_TYPE_VERSION), NULL);
	expect_str("unknown type",
	           fi_tostr(&caps, (enum fi_type)(FI_TYPE_LOG_SUBSYS + 1)),
	           "Unknown type");
	expect_str("negative type", fi_tostr(&caps, (enum fi_type) - 1), "Unknown type");
	expect_str("NULL buffer", fi_tostr_r(NULL, sizeof(buf), &caps, FI_TYPE_CAPS),
	           NULL);

	memset(buf, GUARD, sizeof(buf));
	expect_str("NULL data, tostr_r", fi_tostr_r(buf, sizeof(buf), NULL, FI_TYPE_CAPS),
	           NULL);
	expect_true("NULL data leaves the buffer alone", (uint8_t)buf[0] == GUARD);

	memset(buf, GUARD, sizeof(buf));
	expect_str("len 0", fi_tostr_r(buf, 0, &caps, FI_TYPE_CAPS), NULL);
	expect_true("len 0 writes nothing", (uint8_t)buf[0] == GUARD);

	/* The text is cut one byte before the end of the buffer, and the last
	 * byte is never written; a list cut inside a separator keeps it. */
	static const struct {
		size_t len;
		const char *want;
	} cuts[] = {
	    {1, ""},
	    {2, ""},
	    {5, "FI_"},
	    {8, "FI_MSG"},
	    {9, "FI_MSG,"},
	    {10, "FI_MSG"},
	    {11, "FI_MSG, F"},
	    {26, "FI_MSG, FI_RMA, FI_TAGGE"},
	    {28, "FI_MSG, FI_RMA, FI_TAGGED,"},
	    {29, "FI_MSG, FI_RMA, FI_TAGGED"},
	};
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		memset(buf, GUARD, sizeof(buf));
		char *r = fi_tostr_r(buf, cuts[i].len, &caps, FI_TYPE_CAPS);
		snprintf(what, sizeof(what), "caps in %zu bytes", cuts[i].len);
		expect_str(what, r, cuts[i].want);
		snprintf(what, sizeof(what), "caps in %zu bytes: returns buf",
		         cuts[i].len);
		expect_true(what, r == buf);
		size_t from = cuts[i].len > 1 ? cuts[i].len - 1 : 1;
		snprintf(what, sizeof(what),
		         "caps in %zu bytes: bytes from %zu untouched", cuts[i].len,
		         from);
		int clean = 1;
		for (size_t k = from; k < sizeof(buf); k++)
			clean &= (uint8_t)buf[k] == GUARD;
		expect_true(what, clean);
	}

	/* A big structure into small buffers of every size: never past len. */
	struct fi_domain_attr dom;
	fill_domain(&dom);
	struct fi_info info = {.tx_attr = &tx,
	                       .rx_attr = &rx,
	                       .ep_attr = &ep,
	                       .domain_attr = &dom,
	                       .fabric_attr = &fab};
	char big[2048];
	for (size_t len = 0; len < 1200; len++) {
		memset(big, GUARD, sizeof(big));
		fi_tostr_r(big, len, &info, FI_TYPE_INFO);
		size_t k = len > 1 ? len - 1 : len;
		while (k < sizeof(big) && (uint8_t)big[k] == GUARD)
			k++;
		if (k != sizeof(big)) {
			snprintf(what, sizeof(what),
			         "fi_info in %zu bytes wrote byte %zu", len, k);
			expect_true(what, 0);
			break;
		}
		if (len && strnlen(big, len) >= len) {
			snprintf(what, sizeof(what), "fi_info in %zu bytes unterminated",
			         len);
			expect_true(what, 0);
			break;
		}
	}
	check_count++;

	/* fi_tostr's own buffer holds 8190 characters of text. */
	static char name[10000];
	memset(name, 'n', sizeof(name) - 1);
	struct fi_fabric_attr longname = fab;
	longname.name = name;
	const char *s = fi_tostr(&longname, FI_TYPE_FABRIC_ATTR);
	expect_true("fi_tostr cuts long text at 8190 characters", s && strlen(s) == 8190);
}

int main(void)
{
	check_flags();
	check_enums();
	check_structs();
	check_fids();
	check_bad_input();
	return check_done();
}
