/* tostr.c - fi_tostr / fi_tostr_r: the text form of fabric attributes, flags
 * and enum values that `fi_info -v` prints and scripts parse. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_trigger.h>

#include "core.h"
#include "v1_names.h"

/* fi_tostr's private buffer; its size is part of the observable behaviour
 * (long output is cut at the same place as in libfabric). */
#define TOSTR_BUF_SIZE 8192

/* ---- appending to the caller's buffer --------------------------------- */

/* Every piece of output is appended to the NUL-terminated text already in
 * buf.  The last byte of the caller's buffer is never written: libfabric
 * keeps it spare, and output is cut one byte early to stay identical. */
static void put(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void put(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strnlen(buf, len);
	va_list ap;

	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - 1 - used, fmt, ap);
	va_end(ap);
}

/* Lists are written as "A, B, " and the final separator removed afterwards.
 * When truncation cut the list inside a separator nothing is removed, which
 * is what libfabric prints too. */
static void drop_separator(char *buf, size_t len)
{
	size_t used = strnlen(buf, len);

	if (used >= 2 && buf[used - 2] == ',' && buf[used - 1] == ' ')
		buf[used - 2] = '\0';
}

static const char *str_or_null(const char *s)
{
	return s ? s : "(null)";
}

/* ---- flag sets ---------------------------------------------------------- */

struct flag_name {
	uint64_t bit;
	const char *name;
};

#define FLAG(f)                                                                          \
	{                                                                                \
		(uint64_t)(f), #f                                                        \
	}

/* Each table is in the order libfabric lists the names, which is not
 * always bit order. */
static const struct flag_name caps_flags[] = {
    FLAG(FI_MSG),          FLAG(FI_RMA),
    FLAG(FI_TAGGED),       FLAG(FI_ATOMIC),
    FLAG(FI_MULTICAST),    FLAG(FI_COLLECTIVE),
    FLAG(FI_READ),         FLAG(FI_WRITE),
    FLAG(FI_RECV),         FLAG(FI_SEND),
    FLAG(FI_REMOTE_READ),  FLAG(FI_REMOTE_WRITE),
    FLAG(FI_MULTI_RECV),   FLAG(FI_REMOTE_CQ_DATA),
    FLAG(FI_TRIGGER),      FLAG(FI_FENCE),
    FLAG(FI_VARIABLE_MSG), FLAG(FI_RMA_PMEM),
    FLAG(FI_SOURCE_ERR),   FLAG(FI_LOCAL_COMM),
    FLAG(FI_REMOTE_COMM),  FLAG(FI_SHARED_AV),
    FLAG(FI_RMA_EVENT),    FLAG(FI_SOURCE),
    FLAG(FI_NAMED_RX_CTX), FLAG(FI_DIRECTED_RECV),
    FLAG(FI_AV_USER_ID),   FLAG(FI_PEER),
    FLAG(FI_HMEM),
};

static const struct flag_name op_flags[] = {
    FLAG(FI_MULTICAST),
    FLAG(FI_MULTI_RECV),
    FLAG(FI_REMOTE_CQ_DATA),
    FLAG(FI_MORE),
    FLAG(FI_PEEK),
    FLAG(FI_TRIGGER),
    FLAG(FI_FENCE),
    FLAG(FI_COMPLETION),
    FLAG(FI_INJECT),
    FLAG(FI_INJECT_COMPLETE),
    FLAG(FI_TRANSMIT_COMPLETE),
    FLAG(FI_DELIVERY_COMPLETE),
    FLAG(FI_MATCH_COMPLETE),
    FLAG(FI_AFFINITY),
    FLAG(FI_CLAIM),
    FLAG(FI_DISCARD),
};

static const struct flag_name msg_order_flags[] = {
    FLAG(FI_ORDER_RAR),        FLAG(FI_ORDER_RAW),        FLAG(FI_ORDER_RAS),
    FLAG(FI_ORDER_WAR),        FLAG(FI_ORDER_WAW),        FLAG(FI_ORDER_WAS),
    FLAG(FI_ORDER_SAR),        FLAG(FI_ORDER_SAW),        FLAG(FI_ORDER_SAS),
    FLAG(FI_ORDER_RMA_RAR),    FLAG(FI_ORDER_RMA_RAW),    FLAG(FI_ORDER_RMA_WAR),
    FLAG(FI_ORDER_RMA_WAW),    FLAG(FI_ORDER_ATOMIC_RAR), FLAG(FI_ORDER_ATOMIC_RAW),
    FLAG(FI_ORDER_ATOMIC_WAR), FLAG(FI_ORDER_ATOMIC_WAW),
};

static const struct flag_name mode_flags[] = {
    FLAG(FI_CONTEXT),         FLAG(FI_MSG_PREFIX), FLAG(FI_ASYNC_IOV),
    FLAG(FI_RX_CQ_DATA),      {LM_LOCAL_MR, "FI_LOCAL_MR"}, FLAG(FI_NOTIFY_FLAGS_ONLY),
    FLAG(FI_RESTRICTED_COMP), FLAG(FI_CONTEXT2),   FLAG(FI_BUFFERED_RECV),
};

static const struct flag_name cq_event_flags[] = {
    FLAG(FI_SEND),
    FLAG(FI_RECV),
    FLAG(FI_RMA),
    FLAG(FI_ATOMIC),
    FLAG(FI_MSG),
    FLAG(FI_TAGGED),
    FLAG(FI_READ),
    FLAG(FI_WRITE),
    FLAG(FI_REMOTE_READ),
    FLAG(FI_REMOTE_WRITE),
    FLAG(FI_REMOTE_CQ_DATA),
    FLAG(FI_MULTI_RECV),
    FLAG(FI_MORE),
    FLAG(FI_CLAIM),
};

static const struct flag_name mr_mode_flags[] = {
    {LM_MR_BASIC, "FI_MR_BASIC"}, {LM_MR_SCALABLE, "FI_MR_SCALABLE"}, FLAG(FI_MR_LOCAL),
    FLAG(FI_MR_RAW),      FLAG(FI_MR_VIRT_ADDR),  FLAG(FI_MR_ALLOCATED),
    FLAG(FI_MR_PROV_KEY), FLAG(FI_MR_MMU_NOTIFY), FLAG(FI_MR_RMA_EVENT),
    FLAG(FI_MR_ENDPOINT), FLAG(FI_MR_HMEM),       FLAG(FI_MR_COLLECTIVE),
};

struct flag_table {
	const struct flag_name *names;
	size_t count;
};

#define FLAG_TABLE(t)                                                                    \
	{                                                                                \
		t, LM_ARRAY_SIZE(t)                                                      \
	}

static const struct flag_table caps_table = FLAG_TABLE(caps_flags);
static const struct flag_table op_table = FLAG_TABLE(op_flags);
static const struct flag_table order_table = FLAG_TABLE(msg_order_flags);
static const struct flag_table mode_table = FLAG_TABLE(mode_flags);
static const struct flag_table cq_event_table = FLAG_TABLE(cq_event_flags);
static const struct flag_table mr_mode_table = FLAG_TABLE(mr_mode_flags);

static void put_flags(char *buf, size_t len, uint64_t value, const struct flag_table *t)
{
	for (size_t i = 0; i < t->count; i++)
		if (value & t->names[i].bit)
			put(buf, len, "%s, ", t->names[i].name);
	drop_separator(buf, len);
}

/* Completion order is not a plain bit set: the nine ordering bits are
 * reported together as STRICT (all set) or NONE (none set). */
static void put_comp_order(char *buf, size_t len, uint64_t value)
{
	if ((value & LM_ORDER_STRICT) == LM_ORDER_STRICT)
		put(buf, len, "FI_ORDER_STRICT, ");
	if ((value & LM_ORDER_STRICT) == 0)
		put(buf, len, "FI_ORDER_NONE, ");
	if (value & LM_ORDER_DATA)
		put(buf, len, "FI_ORDER_DATA, ");
	drop_separator(buf, len);
}

/* ---- enum values -------------------------------------------------------- */

struct enum_table {
	const char *const *names;
	size_t count;
	/* Values with FI_PROV_SPECIFIC set are reported as such. */
	bool prov_specific;
};

#define NAME(v) [v] = #v

static const char *const ep_type_names[] = {
    NAME(FI_EP_UNSPEC), NAME(FI_EP_MSG),         NAME(FI_EP_DGRAM),
    NAME(FI_EP_RDM),    NAME(FI_EP_SOCK_STREAM), NAME(FI_EP_SOCK_DGRAM),
};

static const char *const addr_format_names[] = {
    NAME(FI_FORMAT_UNSPEC), NAME(FI_SOCKADDR),    NAME(FI_SOCKADDR_IN),
    NAME(FI_SOCKADDR_IN6),  NAME(FI_SOCKADDR_IB), NAME(FI_ADDR_PSMX),
    NAME(FI_ADDR_GNI),      NAME(FI_ADDR_BGQ),    NAME(FI_ADDR_MLX),
    NAME(FI_ADDR_STR),      NAME(FI_ADDR_PSMX2),  NAME(FI_ADDR_IB_UD),
    NAME(FI_ADDR_EFA),      NAME(FI_ADDR_PSMX3),  NAME(FI_ADDR_OPX),
    NAME(FI_ADDR_CXI),
};

static const char *const threading_names[] = {
    NAME(FI_THREAD_UNSPEC), NAME(FI_THREAD_SAFE),       NAME(FI_THREAD_FID),
    NAME(FI_THREAD_DOMAIN), NAME(FI_THREAD_COMPLETION), NAME(FI_THREAD_ENDPOINT),
};

static const char *const progress_names[] = {
    NAME(FI_PROGRESS_UNSPEC),
    NAME(FI_PROGRESS_AUTO),
    NAME(FI_PROGRESS_MANUAL),
};

static const char *const resource_mgmt_names[] = {
    NAME(FI_RM_UNSPEC),
    NAME(FI_RM_DISABLED),
    NAME(FI_RM_ENABLED),
};

/* FI_PROTO_MXM and FI_PROTO_MRAIL are left out: libfabric calls them
 * unknown. */
static const char *const protocol_names[] = {
    NAME(FI_PROTO_UNSPEC),   NAME(FI_PROTO_RDMA_CM_IB_RC), NAME(FI_PROTO_IWARP),
    NAME(FI_PROTO_IB_UD),    NAME(FI_PROTO_PSMX),          NAME(FI_PROTO_UDP),
    NAME(FI_PROTO_SOCK_TCP), NAME(FI_PROTO_IWARP_RDM),     NAME(FI_PROTO_IB_RDM),
    NAME(FI_PROTO_GNI),      NAME(FI_PROTO_RXM),           NAME(FI_PROTO_RXD),
    NAME(FI_PROTO_MLX),      NAME(FI_PROTO_NETWORKDIRECT), NAME(FI_PROTO_PSMX2),
    NAME(FI_PROTO_SHM),      NAME(FI_PROTO_RSTREAM),       NAME(FI_PROTO_RDMA_CM_IB_XRC),
    NAME(FI_PROTO_EFA),      NAME(FI_PROTO_PSMX3),         NAME(FI_PROTO_RXM_TCP),
    NAME(FI_PROTO_OPX),      NAME(FI_PROTO_CXI),           NAME(FI_PROTO_XNET),
};

static const char *const av_type_names[] = {
    NAME(FI_AV_UNSPEC),
    NAME(FI_AV_MAP),
    NAME(FI_AV_TABLE),
};

static const char *const atomic_type_names[] = {
    NAME(FI_INT8),          NAME(FI_UINT8),
    NAME(FI_INT16),         NAME(FI_UINT16),
    NAME(FI_INT32),         NAME(FI_UINT32),
    NAME(FI_INT64),         NAME(FI_UINT64),
    NAME(FI_FLOAT),         NAME(FI_DOUBLE),
    NAME(FI_FLOAT_COMPLEX), NAME(FI_DOUBLE_COMPLEX),
    NAME(FI_LONG_DOUBLE),   NAME(FI_LONG_DOUBLE_COMPLEX),
    NAME(FI_INT128),        NAME(FI_UINT128),
};

static const char *const atomic_op_names[] = {
    NAME(FI_MIN),      NAME(FI_MAX),      NAME(FI_SUM),         NAME(FI_PROD),
    NAME(FI_LOR),      NAME(FI_LAND),     NAME(FI_BOR),         NAME(FI_BAND),
    NAME(FI_LXOR),     NAME(FI_BXOR),     NAME(FI_ATOMIC_READ), NAME(FI_ATOMIC_WRITE),
    NAME(FI_CSWAP),    NAME(FI_CSWAP_NE), NAME(FI_CSWAP_LE),    NAME(FI_CSWAP_LT),
    NAME(FI_CSWAP_GE), NAME(FI_CSWAP_GT), NAME(FI_MSWAP),
};

static const char *const eq_event_names[] = {
    NAME(FI_NOTIFY),      NAME(FI_CONNREQ),     NAME(FI_CONNECTED),     NAME(FI_SHUTDOWN),
    NAME(FI_MR_COMPLETE), NAME(FI_AV_COMPLETE), NAME(FI_JOIN_COMPLETE),
};

static const char *const op_type_names[] = {
    NAME(FI_OP_RECV),     NAME(FI_OP_SEND),         NAME(FI_OP_TRECV),
    NAME(FI_OP_TSEND),    NAME(FI_OP_READ),         NAME(FI_OP_WRITE),
    NAME(FI_OP_ATOMIC),   NAME(FI_OP_FETCH_ATOMIC), NAME(FI_OP_COMPARE_ATOMIC),
    NAME(FI_OP_CNTR_SET), NAME(FI_OP_CNTR_ADD),
};

static const char *const collective_op_names[] = {
    NAME(FI_BARRIER),   NAME(FI_BROADCAST), NAME(FI_ALLTOALL),
    NAME(FI_ALLREDUCE), NAME(FI_ALLGATHER), NAME(FI_REDUCE_SCATTER),
    NAME(FI_REDUCE),    NAME(FI_SCATTER),   NAME(FI_GATHER),
};

static const char *const hmem_iface_names[] = {
    NAME(FI_HMEM_SYSTEM), NAME(FI_HMEM_CUDA),   NAME(FI_HMEM_ROCR),
    NAME(FI_HMEM_ZE),     NAME(FI_HMEM_NEURON), NAME(FI_HMEM_SYNAPSEAI),
};

static const char *const cq_format_names[] = {
    NAME(FI_CQ_FORMAT_UNSPEC), NAME(FI_CQ_FORMAT_CONTEXT), NAME(FI_CQ_FORMAT_MSG),
    NAME(FI_CQ_FORMAT_DATA),   NAME(FI_CQ_FORMAT_TAGGED),
};

/* The same words FI_LOG_LEVEL and FI_LOG_SUBSYS accept. */
static const char *const log_level_names[] = {
    [FI_LOG_WARN] = "warn",
    [FI_LOG_TRACE] = "trace",
    [FI_LOG_INFO] = "info",
    [FI_LOG_DEBUG] = "debug",
};

static const char *const log_subsys_names[] = {
    [FI_LOG_CORE] = "core",       [FI_LOG_FABRIC] = "fabric",
    [FI_LOG_DOMAIN] = "domain",   [FI_LOG_EP_CTRL] = "ep_ctrl",
    [FI_LOG_EP_DATA] = "ep_data", [FI_LOG_AV] = "av",
    [FI_LOG_CQ] = "cq",           [FI_LOG_EQ] = "eq",
    [FI_LOG_MR] = "mr",           [FI_LOG_CNTR] = "cntr",
};

#define ENUM_TABLE(t)                                                                    \
	{                                                                                \
		t, LM_ARRAY_SIZE(t), false                                               \
	}
#define PROV_ENUM_TABLE(t)                                                               \
	{                                                                                \
		t, LM_ARRAY_SIZE(t), true                                                \
	}

static const struct enum_table ep_type_table = ENUM_TABLE(ep_type_names);
static const struct enum_table addr_format_table = PROV_ENUM_TABLE(addr_format_names);
static const struct enum_table threading_table = ENUM_TABLE(threading_names);
static const struct enum_table progress_table = ENUM_TABLE(progress_names);
static const struct enum_table resource_mgmt_table = ENUM_TABLE(resource_mgmt_names);
static const struct enum_table protocol_table = PROV_ENUM_TABLE(protocol_names);
static const struct enum_table av_type_table = ENUM_TABLE(av_type_names);
static const struct enum_table atomic_type_table = ENUM_TABLE(atomic_type_names);
static const struct enum_table atomic_op_table = ENUM_TABLE(atomic_op_names);
static const struct enum_table eq_event_table = ENUM_TABLE(eq_event_names);
static const struct enum_table op_type_table = ENUM_TABLE(op_type_names);
static const struct enum_table collective_op_table = ENUM_TABLE(collective_op_names);
static const struct enum_table hmem_iface_table = ENUM_TABLE(hmem_iface_names);
static const struct enum_table cq_format_table = ENUM_TABLE(cq_format_names);
static const struct enum_table log_level_table = ENUM_TABLE(log_level_names);
static const struct enum_table log_subsys_table = ENUM_TABLE(log_subsys_names);

/* Enums are read as 32 bits whatever their declared type, so negative
 * values and FI_PROV_SPECIFIC ones are the same test. */
static const char *enum_name(uint32_t value, const struct enum_table *t)
{
	if (t->prov_specific && (value & FI_PROV_SPECIFIC))
		return "Provider specific";
	if (value < t->count && t->names[value])
		return t->names[value];
	return "Unknown";
}

static void put_enum(char *buf, size_t len, uint32_t value, const struct enum_table *t)
{
	put(buf, len, "%s", enum_name(value, t));
}

/* ---- addresses ---------------------------------------------------------- */

/* Fixed-offset reads of an address whose layout the format names; the
 * caller's pointer need not be aligned. */
static uint16_t rd16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static uint64_t rd64_be(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

/* Offsets into the sockaddr layouts: sin_addr, sin6_addr / sib_addr,
 * sib_sid and sib_scope_id. */
enum { SIN_ADDR_OFF = 4, SIN6_ADDR_OFF = 8, SIB_SID_OFF = 24, SIB_SCOPE_OFF = 40 };

/* Write the URL-like text of an address (everything but FI_ADDR_STR, whose
 * string is printed as it is).  The sockaddr formats read the address in
 * the family the sockaddr itself claims, at the offset the format implies;
 * an address the C library cannot print gives empty text. */
static void format_addr(char *out, size_t n, uint32_t format, const uint8_t *a)
{
	char ip[INET6_ADDRSTRLEN];
	sa_family_t family = 0;

	out[0] = '\0';
	/* BGQ and MLX print only the pointer; nothing is read for them. */
	if (format == FI_SOCKADDR || format == FI_SOCKADDR_IN ||
	    format == FI_SOCKADDR_IN6)
		family = rd16(a);
	if (format == FI_SOCKADDR) {
		if (family == AF_INET)
			format = FI_SOCKADDR_IN;
		else if (family == AF_INET6)
			format = FI_SOCKADDR_IN6;
		else
			return;
	}

	switch (format) {
	case FI_SOCKADDR_IN:
		if (inet_ntop(family, a + SIN_ADDR_OFF, ip, sizeof(ip)))
			snprintf(out, n, "fi_sockaddr_in://%s:%u", ip,
			         ntohs(rd16(a + 2)));
		break;
	case FI_SOCKADDR_IN6:
		if (inet_ntop(family, a + SIN6_ADDR_OFF, ip, sizeof(ip)))
			snprintf(out, n, "fi_sockaddr_in6://[%s]:%u", ip,
			         ntohs(rd16(a + 2)));
		break;
	case FI_SOCKADDR_IB:
		/* pkey, then the port space carried in the service id, then
		 * the low byte of the scope id. */
		if (inet_ntop(AF_INET6, a + SIN6_ADDR_OFF, ip, sizeof(ip)))
			snprintf(out, n, "fi_sockaddr_ib://[%s]:0x%x:0x%x:0x%x", ip,
			         ntohs(rd16(a + 2)),
			         (unsigned)((rd64_be(a + SIB_SID_OFF) >> 16) & 0xfff),
			         (unsigned)(rd64_be(a + SIB_SCOPE_OFF) & 0xff));
		break;
	case FI_ADDR_PSMX:
		snprintf(out, n, "fi_addr_psmx://%" PRIx64, rd64(a));
		break;
	case FI_ADDR_GNI:
		snprintf(out, n, "fi_addr_gni://%" PRIx64, rd64(a));
		break;
	case FI_ADDR_BGQ:
		snprintf(out, n, "fi_addr_bgq://%p", (const void *)a);
		break;
	case FI_ADDR_MLX:
		snprintf(out, n, "fi_addr_mlx://%p", (const void *)a);
		break;
	case FI_ADDR_PSMX2:
		snprintf(out, n, "fi_addr_psmx2://%" PRIx64 ":%" PRIx64, rd64(a),
		         rd64(a + 8));
		break;
	case FI_ADDR_IB_UD:
		/* gid, then qpn / lid / pkey / service level */
		if (inet_ntop(AF_INET6, a, ip, sizeof(ip)))
			snprintf(out, n, "fi_addr_ib_ud://%s:%" PRIx32 "/%x/%x/%x", ip,
			         rd32(a + 16), rd16(a + 20), rd16(a + 22), a[26]);
		break;
	case FI_ADDR_EFA:
		if (inet_ntop(AF_INET6, a, ip, sizeof(ip)))
			snprintf(out, n, "fi_addr_efa://[%s]:%u:%" PRIu32, ip,
			         rd16(a + 16), rd32(a + 20));
		break;
	case FI_ADDR_PSMX3:
		snprintf(out, n,
		         "fi_addr_psmx3://%" PRIx64 ":%" PRIx64 ":%" PRIx64 ":%" PRIx64,
		         rd64(a), rd64(a + 8), rd64(a + 16), rd64(a + 24));
		break;
	case FI_ADDR_OPX:
		snprintf(out, n, "fi_addr_opx://%016" PRIx64, rd64(a));
		break;
	case FI_ADDR_CXI:
		snprintf(out, n, "fi_addr_cxi://0x%08" PRIx32, rd32(a));
		break;
	default:
		break;
	}
}

/* An info's address of addrlen bytes.  A binary one is read from a
 * zero-padded copy of those bytes, so a short one is not read past its
 * end; an info that gives no length (0) is read by its format alone, and
 * text up to its NUL, whatever the length says, as libfabric does. */
static void put_addr(char *buf, size_t len, const char *label, uint32_t format,
                     const void *addr, size_t addrlen)
{
	char text[128];
	uint8_t copy[64] = {0};

	if (!addr) {
		put(buf, len, "%s(null)\n", label);
	} else if (format == FI_ADDR_STR) {
		put(buf, len, "%s%s\n", label, (const char *)addr);
	} else if (!addrlen || format == FI_ADDR_BGQ || format == FI_ADDR_MLX) {
		/* No length given, or the pointer only: read by the format. */
		format_addr(text, sizeof(text), format, addr);
		put(buf, len, "%s%s\n", label, text);
	} else {
		memcpy(copy, addr, LM_MIN(addrlen, sizeof(copy)));
		format_addr(text, sizeof(text), format, copy);
		put(buf, len, "%s%s\n", label, text);
	}
}

/* ---- fids --------------------------------------------------------------- */

/* A fid whose ops provide tostr describes itself.  By libfabric's
 * convention that callback appends to the text already in buf, and it is
 * told only the room that is left; no label is printed before it. */
static void put_fid(char *buf, size_t len, const char *label, const struct fid *fid)
{
	if (fid && FI_CHECK_OP(fid->ops, struct fi_ops, tostr))
		fid->ops->tostr(fid, buf, len - strnlen(buf, len));
	else
		put(buf, len, "%s%p\n", label, (const void *)fid);
}

/* ---- attribute structures ----------------------------------------------- */

/* Structures print their name at the indent given and their fields four
 * spaces deeper, so the same code serves both standalone and nested use. */
static void put_flag_field(char *buf, size_t len, const char *ind, const char *name,
                           uint64_t value, const struct flag_table *t)
{
	put(buf, len, "%s    %s: [ ", ind, name);
	put_flags(buf, len, value, t);
	put(buf, len, " ]\n");
}

static void put_comp_order_field(char *buf, size_t len, const char *ind, uint64_t value)
{
	put(buf, len, "%s    comp_order: [ ", ind);
	put_comp_order(buf, len, value);
	put(buf, len, " ]\n");
}

static void put_enum_field(char *buf, size_t len, const char *ind, const char *name,
                           uint32_t value, const struct enum_table *t)
{
	put(buf, len, "%s    %s: %s\n", ind, name, enum_name(value, t));
}

static void put_size_field(char *buf, size_t len, const char *ind, const char *name,
                           size_t value)
{
	put(buf, len, "%s    %s: %zu\n", ind, name, value);
}

/* An endpoint's context counts may name the shared context instead of a
 * number (only there; the domain's counts are always numbers). */
static void put_ctx_cnt_field(char *buf, size_t len, const char *ind, const char *name,
                              size_t value)
{
	if (value == FI_SHARED_CONTEXT)
		put(buf, len, "%s    %s: FI_SHARED_CONTEXT\n", ind, name);
	else
		put_size_field(buf, len, ind, name, value);
}

static void put_version_field(char *buf, size_t len, const char *ind, const char *name,
                              uint32_t version)
{
	put(buf, len, "%s    %s: %u.%u\n", ind, name, FI_MAJOR(version),
	    FI_MINOR(version));
}

/* The attributes print as the libfabric of the application's API does:
 * v2 (an fi_info answering FI_VERSION(2, x)) as libfabric 2.x, without
 * the fields 2.x deprecated (comp_order, total_buffered_recv, the control
 * progress) and with fi_domain_attr's 2.x fields; else as 1.x. */
static void put_tx_attr(char *buf, size_t len, const char *ind,
                        const struct fi_tx_attr *a, bool v2)
{
	put(buf, len, "%sfi_tx_attr:\n", ind);
	put_flag_field(buf, len, ind, "caps", a->caps, &caps_table);
	put_flag_field(buf, len, ind, "mode", a->mode, &mode_table);
	put_flag_field(buf, len, ind, "op_flags", a->op_flags, &op_table);
	put_flag_field(buf, len, ind, "msg_order", a->msg_order, &order_table);
	if (!v2)
		put_comp_order_field(buf, len, ind, a->comp_order);
	put_size_field(buf, len, ind, "inject_size", a->inject_size);
	put_size_field(buf, len, ind, "size", a->size);
	put_size_field(buf, len, ind, "iov_limit", a->iov_limit);
	put_size_field(buf, len, ind, "rma_iov_limit", a->rma_iov_limit);
	put(buf, len, "%s    tclass: 0x%" PRIx32 "\n", ind, a->tclass);
}

static void put_rx_attr(char *buf, size_t len, const char *ind,
                        const struct fi_rx_attr *a, bool v2)
{
	put(buf, len, "%sfi_rx_attr:\n", ind);
	put_flag_field(buf, len, ind, "caps", a->caps, &caps_table);
	put_flag_field(buf, len, ind, "mode", a->mode, &mode_table);
	put_flag_field(buf, len, ind, "op_flags", a->op_flags, &op_table);
	put_flag_field(buf, len, ind, "msg_order", a->msg_order, &order_table);
	if (!v2) {
		put_comp_order_field(buf, len, ind, a->comp_order);
		put_size_field(buf, len, ind, "total_buffered_recv", a->total_buffered_recv);
	}
	put_size_field(buf, len, ind, "size", a->size);
	put_size_field(buf, len, ind, "iov_limit", a->iov_limit);
}

static void put_ep_attr(char *buf, size_t len, const char *ind,
                        const struct fi_ep_attr *a, bool v2)
{
	(void)v2; /* the same in both */
	put(buf, len, "%sfi_ep_attr:\n", ind);
	put_enum_field(buf, len, ind, "type", (uint32_t)a->type, &ep_type_table);
	put_enum_field(buf, len, ind, "protocol", a->protocol, &protocol_table);
	/* printed signed, as libfabric does */
	put(buf, len, "%s    protocol_version: %d\n", ind, (int)a->protocol_version);
	put_size_field(buf, len, ind, "max_msg_size", a->max_msg_size);
	put_size_field(buf, len, ind, "msg_prefix_size", a->msg_prefix_size);
	put_size_field(buf, len, ind, "max_order_raw_size", a->max_order_raw_size);
	put_size_field(buf, len, ind, "max_order_war_size", a->max_order_war_size);
	put_size_field(buf, len, ind, "max_order_waw_size", a->max_order_waw_size);
	put(buf, len, "%s    mem_tag_format: 0x%016" PRIx64 "\n", ind, a->mem_tag_format);
	put_ctx_cnt_field(buf, len, ind, "tx_ctx_cnt", a->tx_ctx_cnt);
	put_ctx_cnt_field(buf, len, ind, "rx_ctx_cnt", a->rx_ctx_cnt);
	put_size_field(buf, len, ind, "auth_key_size", a->auth_key_size);
}

static void put_domain_attr(char *buf, size_t len, const char *ind,
                            const struct fi_domain_attr *a, bool v2)
{
	put(buf, len, "%sfi_domain_attr:\n", ind);
	/* libfabric 1.x shows only the low 32 bits of the domain pointer,
	 * 2.x the pointer; tools comparing output expect the same. */
	if (v2)
		put(buf, len, "%s    domain: %p\n", ind, (void *)a->domain);
	else
		put(buf, len, "%s    domain: 0x%x\n", ind, (unsigned)(uintptr_t)a->domain);
	put(buf, len, "%s    name: %s\n", ind, str_or_null(a->name));
	put_enum_field(buf, len, ind, "threading", (uint32_t)a->threading,
	               &threading_table);
	if (v2) {
		put_enum_field(buf, len, ind, "progress", (uint32_t)a->progress,
		               &progress_table);
	} else {
		put_enum_field(buf, len, ind, "control_progress",
		               (uint32_t)a->control_progress, &progress_table);
		put_enum_field(buf, len, ind, "data_progress", (uint32_t)a->data_progress,
		               &progress_table);
	}
	put_enum_field(buf, len, ind, "resource_mgmt", (uint32_t)a->resource_mgmt,
	               &resource_mgmt_table);
	put_enum_field(buf, len, ind, "av_type", (uint32_t)a->av_type, &av_type_table);
	put_flag_field(buf, len, ind, "mr_mode", (uint32_t)a->mr_mode, &mr_mode_table);
	put_size_field(buf, len, ind, "mr_key_size", a->mr_key_size);
	put_size_field(buf, len, ind, "cq_data_size", a->cq_data_size);
	put_size_field(buf, len, ind, "cq_cnt", a->cq_cnt);
	put_size_field(buf, len, ind, "ep_cnt", a->ep_cnt);
	put_size_field(buf, len, ind, "tx_ctx_cnt", a->tx_ctx_cnt);
	put_size_field(buf, len, ind, "rx_ctx_cnt", a->rx_ctx_cnt);
	put_size_field(buf, len, ind, "max_ep_tx_ctx", a->max_ep_tx_ctx);
	put_size_field(buf, len, ind, "max_ep_rx_ctx", a->max_ep_rx_ctx);
	put_size_field(buf, len, ind, "max_ep_stx_ctx", a->max_ep_stx_ctx);
	put_size_field(buf, len, ind, "max_ep_srx_ctx", a->max_ep_srx_ctx);
	put_size_field(buf, len, ind, "cntr_cnt", a->cntr_cnt);
	put_size_field(buf, len, ind, "mr_iov_limit", a->mr_iov_limit);
	put_flag_field(buf, len, ind, "caps", a->caps, &caps_table);
	put_flag_field(buf, len, ind, "mode", a->mode, &mode_table);
	put_size_field(buf, len, ind, "auth_key_size", a->auth_key_size);
	put_size_field(buf, len, ind, "max_err_data", a->max_err_data);
	put_size_field(buf, len, ind, "mr_cnt", a->mr_cnt);
	put(buf, len, "%s    tclass: 0x%" PRIx32 "\n", ind, a->tclass);
	if (v2) { /* 2.x's structure has them */
		put_size_field(buf, len, ind, "max_ep_auth_key", a->max_ep_auth_key);
		put(buf, len, "%s    max_group_id: %" PRIu32 "\n", ind, a->max_group_id);
		put(buf, len, "%s    max_cntr_value: %" PRIu64 "\n", ind, a->max_cntr_value);
		put(buf, len, "%s    max_err_cntr_value: %" PRIu64 "\n", ind,
		    a->max_err_cntr_value);
	}
}

static void put_fabric_attr(char *buf, size_t len, const char *ind,
                            const struct fi_fabric_attr *a, bool v2)
{
	(void)v2; /* the same in both */
	put(buf, len, "%sfi_fabric_attr:\n", ind);
	put(buf, len, "%s    name: %s\n", ind, str_or_null(a->name));
	put(buf, len, "%s    prov_name: %s\n", ind, str_or_null(a->prov_name));
	put_version_field(buf, len, ind, "prov_version", a->prov_version);
	put_version_field(buf, len, ind, "api_version", a->api_version);
}

/* A sub-structure of fi_info: its dump, or "(null)" on the name line. */
#define PUT_SUB(buf, len, name, printer, attr, v2)                                       \
	do {                                                                             \
		if (attr)                                                                \
			printer(buf, len, "    ", attr, v2);                             \
		else                                                                     \
			put(buf, len, "    " name ": (null)\n");                         \
	} while (0)

/* One fi_info, not the list behind it: fi_info(1) prints the "---"
 * separators itself. */
static void put_info(char *buf, size_t len, const struct fi_info *info)
{
	bool v2 = info->fabric_attr && FI_MAJOR(info->fabric_attr->api_version) == 2;

	put(buf, len, "fi_info:\n");
	put_flag_field(buf, len, "", "caps", info->caps, &caps_table);
	put_flag_field(buf, len, "", "mode", info->mode, &mode_table);
	put_enum_field(buf, len, "", "addr_format", info->addr_format,
	               &addr_format_table);
	put_size_field(buf, len, "", "src_addrlen", info->src_addrlen);
	put_size_field(buf, len, "", "dest_addrlen", info->dest_addrlen);
	put_addr(buf, len, "    src_addr: ", info->addr_format, info->src_addr,
	         info->src_addrlen);
	put_addr(buf, len, "    dest_addr: ", info->addr_format, info->dest_addr,
	         info->dest_addrlen);
	put_fid(buf, len, "    handle: ", info->handle);
	PUT_SUB(buf, len, "fi_tx_attr", put_tx_attr, info->tx_attr, v2);
	PUT_SUB(buf, len, "fi_rx_attr", put_rx_attr, info->rx_attr, v2);
	PUT_SUB(buf, len, "fi_ep_attr", put_ep_attr, info->ep_attr, v2);
	PUT_SUB(buf, len, "fi_domain_attr", put_domain_attr, info->domain_attr, v2);
	PUT_SUB(buf, len, "fi_fabric_attr", put_fabric_attr, info->fabric_attr, v2);
	put_fid(buf, len, "    nic: ", info->nic ? &info->nic->fid : NULL);
}

/* ---- entry points ------------------------------------------------------- */

/* Scalars are read at the width their field has in the structures. */
static uint64_t rd_u64(const void *data)
{
	return *(const uint64_t *)data;
}

static uint32_t rd_u32(const void *data)
{
	return *(const uint32_t *)data;
}

/* How fi_tostr prints a scalar type: an enumeration read as uint32_t, or
 * flags read as uint64_t (narrow: as uint32_t). */
struct scalar_type {
	const struct enum_table *names;
	const struct flag_table *flags;
	bool narrow;
};

static const struct scalar_type scalar_types[] = {
    [FI_TYPE_EP_TYPE] = {.names = &ep_type_table},
    [FI_TYPE_CAPS] = {.flags = &caps_table},
    [FI_TYPE_OP_FLAGS] = {.flags = &op_table},
    [FI_TYPE_ADDR_FORMAT] = {.names = &addr_format_table},
    [FI_TYPE_THREADING] = {.names = &threading_table},
    [FI_TYPE_PROGRESS] = {.names = &progress_table},
    [FI_TYPE_PROTOCOL] = {.names = &protocol_table},
    [FI_TYPE_MSG_ORDER] = {.flags = &order_table},
    [FI_TYPE_MODE] = {.flags = &mode_table},
    [FI_TYPE_AV_TYPE] = {.names = &av_type_table},
    [FI_TYPE_ATOMIC_TYPE] = {.names = &atomic_type_table},
    [FI_TYPE_ATOMIC_OP] = {.names = &atomic_op_table},
    [FI_TYPE_EQ_EVENT] = {.names = &eq_event_table},
    [FI_TYPE_CQ_EVENT_FLAGS] = {.flags = &cq_event_table},
    /* mr_mode is an int in fi_domain_attr */
    [FI_TYPE_MR_MODE] = {.flags = &mr_mode_table, .narrow = true},
    [FI_TYPE_OP_TYPE] = {.names = &op_type_table},
    [FI_TYPE_COLLECTIVE_OP] = {.names = &collective_op_table},
    [FI_TYPE_HMEM_IFACE] = {.names = &hmem_iface_table},
    [FI_TYPE_CQ_FORMAT] = {.names = &cq_format_table},
    [FI_TYPE_LOG_LEVEL] = {.names = &log_level_table},
    [FI_TYPE_LOG_SUBSYS] = {.names = &log_subsys_table},
};

/* Print data as the scalar type t: false when t is not one. */
static bool put_scalar(char *buf, size_t len, const void *data, enum fi_type t)
{
	const struct scalar_type *s;

	if ((size_t)t >= LM_ARRAY_SIZE(scalar_types))
		return false;
	s = &scalar_types[t];
	if (s->names)
		put_enum(buf, len, rd_u32(data), s->names);
	else if (s->flags)
		put_flags(buf, len, s->narrow ? rd_u32(data) : rd_u64(data), s->flags);
	else
		return false;
	return true;
}

/* Print data as the structure (or the version, or fid) type t, or say the
 * type is unknown. */
static void put_other(char *buf, size_t len, const void *data, enum fi_type t)
{
	switch (t) {
	case FI_TYPE_INFO:
		put_info(buf, len, data);
		break;
	case FI_TYPE_TX_ATTR:
		put_tx_attr(buf, len, "", data, false); /* no api_version to tell */
		break;
	case FI_TYPE_RX_ATTR:
		put_rx_attr(buf, len, "", data, false); /* no api_version to tell */
		break;
	case FI_TYPE_EP_ATTR:
		put_ep_attr(buf, len, "", data, false); /* no api_version to tell */
		break;
	case FI_TYPE_DOMAIN_ATTR:
		put_domain_attr(buf, len, "", data, false); /* no api_version to tell */
		break;
	case FI_TYPE_FABRIC_ATTR:
		put_fabric_attr(buf, len, "", data, false); /* no api_version to tell */
		break;
	case FI_TYPE_VERSION:
		put(buf, len, "%d.%d.%d", FI_MAJOR_VERSION, FI_MINOR_VERSION,
		    FI_REVISION_VERSION);
		break;
	case FI_TYPE_FID:
		put_fid(buf, len, "fid: ", data);
		break;
	default:
		put(buf, len, "Unknown type");
		break;
	}
}

LM_EXPORT char *fi_tostr_r(char *buf, size_t len, const void *data, enum fi_type datatype)
{
	if (!buf || !len || !data)
		return NULL;

	buf[0] = '\0';
	if (!put_scalar(buf, len, data, datatype))
		put_other(buf, len, data, datatype);
	return buf;
}

LM_EXPORT char *fi_tostr(const void *data, enum fi_type datatype)
{
	/* The man page allows one static buffer; one per thread costs nothing
	 * more and lets threads call this without racing. */
	static _Thread_local char buf[TOSTR_BUF_SIZE];

	return fi_tostr_r(buf, sizeof(buf), data, datatype);
}
