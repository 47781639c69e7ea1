/* fabric.h - base of loom's public API: versions, capability and mode bits,
 * the fi_info attribute tree, the fid object header, and fabric entry points. */
#ifndef LOOM_RDMA_FABRIC_H
#define LOOM_RDMA_FABRIC_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <rdma/fi_errno.h>

/* ---- Compiler helpers used by every other public header ------------------ */

#ifdef __GNUC__
#define FI_DEPRECATED_FUNC  __attribute__((deprecated))
#define FI_DEPRECATED_FIELD __attribute__((deprecated))
#define FI_FORMAT_PRINTF(string, first)                                                  \
	__attribute__((__format__(__printf__, (string), (first))))
#else
#define FI_DEPRECATED_FUNC
#define FI_DEPRECATED_FIELD
#define FI_FORMAT_PRINTF(string, first)
#endif

/* Keeps a provider's entry point alive under gcc's whole-program LTO; clang
 * has no such attribute. */
#if defined(__GNUC__) && !defined(__clang__)
#define EXTERNALLY_VISIBLE externally_visible
#else
#define EXTERNALLY_VISIBLE
#endif

/* A 1.x name that the 2.x API deprecated: each use warns, as it does with
 * libfabric 2.x's headers, and still has its old value. */
#define FI_DEPRECATED_NAME(pragma) _Pragma(pragma)

#ifdef __cplusplus
extern "C" {
#endif

/* Applications commonly rely on fabric.h for these two; define them only if
 * the program has not brought its own. */
#ifndef container_of
#define container_of(ptr, type, field) ((type *)((char *)(ptr)-offsetof(type, field)))
#endif

/* The divisor is zero (a compile-time error) when x is a pointer whose size is
 * not a multiple of its element size, catching the most common misuse. */
#ifndef count_of
#define count_of(x)                                                                      \
	((sizeof(x) / sizeof(0 [x])) / ((size_t)(!(sizeof(x) % sizeof(0 [x])))))
#endif

/* ---- Versions ------------------------------------------------------------- */

#define FI_MAJOR_VERSION    2
#define FI_MINOR_VERSION    6
#define FI_REVISION_VERSION 0

/* A version is packed as major in the high 16 bits, minor in the low 16. */
#define FI_VERSION(major, minor) (((major) << 16) | (minor))
#define FI_MAJOR(version)        ((version) >> 16)
#define FI_MINOR(version)        ((version)&0xFFFF)
#define FI_VERSION_GE(v1, v2)    ((v1) >= (v2))
#define FI_VERSION_LT(v1, v2)    ((v1) < (v2))

/* Library version in the same packing, for run-time checks against the
 * version a program was compiled with. */
uint32_t fi_version(void);

/* Buffer sizes for names and paths carried in attributes. */
enum { FI_PATH_MAX = 256, FI_NAME_MAX = 64, FI_VERSION_MAX = 64 };

/* ---- Object handles --------------------------------------------------------- */

struct fid;
struct fid_fabric;
struct fid_domain;
struct fid_av;
struct fid_wait;
struct fid_poll;
struct fid_eq;
struct fid_cq;
struct fid_cntr;
struct fid_ep;
struct fid_pep;
struct fid_stx;
struct fid_mr;
struct fid_nic;

/* Only declared here; fi_eq.h defines them, but fi_ops_fabric names them in
 * prototypes and they must already have file scope there. */
struct fi_eq_attr;
struct fi_wait_attr;

typedef struct fid *fid_t;

/* Values a provider invents for itself (fid classes, option names, value
 * names) carry this bit so they can never collide with common ones. */
#define FI_PROV_SPECIFIC (1U << 31)

/*
 * ---- Capability and operation flags ---------------------------------------
 *
 * One 64-bit space serves fi_info::caps, the tx/rx op_flags, per-call flags
 * and completion flags.  Bits shared by many calls are allocated from the
 * bottom, bits meaningful to only one call or class from bit 59 down (and may
 * therefore overlap each other), and bits 60-63 are left to providers.
 */

/* Interfaces an endpoint supports. */
#define FI_MSG        (1ULL << 1)
#define FI_RMA        (1ULL << 2)
#define FI_TAGGED     (1ULL << 3)
#define FI_ATOMIC     (1ULL << 4)
#define FI_ATOMICS    FI_ATOMIC
#define FI_MULTICAST  (1ULL << 5)
#define FI_COLLECTIVE (1ULL << 6)

/* Direction: who initiates, who is the target. */
#define FI_READ         (1ULL << 8)
#define FI_WRITE        (1ULL << 9)
#define FI_RECV         (1ULL << 10)
#define FI_SEND         (1ULL << 11)
#define FI_TRANSMIT     FI_SEND
#define FI_REMOTE_READ  (1ULL << 12)
#define FI_REMOTE_WRITE (1ULL << 13)

/* Per-operation behaviour. */
#define FI_MULTI_RECV     (1ULL << 16)
#define FI_REMOTE_CQ_DATA (1ULL << 17)
#define FI_MORE           (1ULL << 18)
#define FI_PEEK           (1ULL << 19)
#define FI_TRIGGER        (1ULL << 20)
#define FI_FENCE          (1ULL << 21)
#define FI_PRIORITY       (1ULL << 22)

/* Whether and when a completion is reported. */
#define FI_COMPLETION        (1ULL << 24)
#define FI_EVENT             FI_COMPLETION
#define FI_INJECT            (1ULL << 25)
#define FI_INJECT_COMPLETE   (1ULL << 26)
#define FI_TRANSMIT_COMPLETE (1ULL << 27)
#define FI_DELIVERY_COMPLETE (1ULL << 28)
#define FI_AFFINITY          (1ULL << 29)
#define FI_COMMIT_COMPLETE   (1ULL << 30)
#define FI_MATCH_COMPLETE    (1ULL << 31)

/* Secondary capabilities and fi_getinfo/AV flags (bits 32-35, 37-40 and 42
 * are unassigned in 1.17). */
#define FI_RESCAN           (1ULL << 35) /* API 2.x: fi_getinfo looks afresh */
#define FI_PEER_TRANSFER    (1ULL << 36)
#define FI_AV_USER_ID       (1ULL << 41)
#define FI_FIREWALL_ADDR    (1ULL << 42) /* API 2.x: the peer is behind a firewall */
#define FI_PEER             (1ULL << 43)
#define FI_XPU_TRIGGER      (1ULL << 44)
#define FI_HMEM_HOST_ALLOC  (1ULL << 45)
#define FI_HMEM_DEVICE_ONLY (1ULL << 46)
#define FI_HMEM             (1ULL << 47)
#define FI_VARIABLE_MSG     (1ULL << 48)
#define FI_RMA_PMEM         (1ULL << 49)
#define FI_SOURCE_ERR       (1ULL << 50)
#define FI_LOCAL_COMM       (1ULL << 51)
#define FI_REMOTE_COMM      (1ULL << 52)
#define FI_SHARED_AV        (1ULL << 53)
#define FI_PROV_ATTR_ONLY   (1ULL << 54)
#define FI_NUMERICHOST      (1ULL << 55)
#define FI_RMA_EVENT        (1ULL << 56)
#define FI_SOURCE           (1ULL << 57)
#define FI_NAMED_RX_CTX     (1ULL << 58)
#define FI_DIRECTED_RECV    (1ULL << 59)

/* API 2.x capabilities, on bits 1.17 gave the registration flags above and
 * FI_VARIABLE_MSG (fi_info::caps never held those): directed receive and
 * multi-receive for tagged receives alone, and directed receive that takes
 * FI_ADDR_UNSPEC as "from that address only". */
#define FI_TAGGED_DIRECTED_RECV (1ULL << 45)
#define FI_TAGGED_MULTI_RECV    (1ULL << 46)
#define FI_EXACT_DIRECTED_RECV  (1ULL << 48)

/* Call-specific reuses of the top bits: tagged receives and buffered
 * receive completions (FI_CLAIM, FI_DISCARD), fi_ep_bind (selective). */
#define FI_CLAIM                (1ULL << 59)
#define FI_DISCARD              (1ULL << 58)
#define FI_SELECTIVE_COMPLETION (1ULL << 59)
/* fi_av_insert (API 2.x): the addresses are authorization keys. */
#define FI_AUTH_KEY (1ULL << 57)

/*
 * ---- Mode bits --------------------------------------------------------------
 *
 * Requirements a provider places on the application (fi_info::mode).  They
 * live in the operation-specific range, so they may equal flag bits above.
 * Bit 36 stays reserved for FI_PEER_TRANSFER.
 */
#define FI_CONTEXT           (1ULL << 59)
#define FI_MSG_PREFIX        (1ULL << 58)
#define FI_ASYNC_IOV         (1ULL << 57)
#define FI_RX_CQ_DATA        (1ULL << 56)
#define FI_LOCAL_MR          FI_DEPRECATED_NAME("GCC warning \"FI_LOCAL_MR is deprecated in the 2.x API\"") (1ULL << 55)
#define FI_NOTIFY_FLAGS_ONLY (1ULL << 54)
#define FI_RESTRICTED_COMP   (1ULL << 53)
#define FI_CONTEXT2          (1ULL << 52)
#define FI_BUFFERED_RECV     (1ULL << 51)

/* ---- Addresses ------------------------------------------------------------- */

/* fi_info::addr_format: what src_addr/dest_addr point at. */
enum {
	FI_FORMAT_UNSPEC, /* opaque bytes */
	FI_SOCKADDR,      /* struct sockaddr, family decides the rest */
	FI_SOCKADDR_IN,
	FI_SOCKADDR_IN6,
	FI_SOCKADDR_IB,
	FI_ADDR_PSMX,
	FI_ADDR_GNI,
	FI_ADDR_BGQ,
	FI_ADDR_MLX,
	FI_ADDR_STR, /* "prov_format://address" text */
	FI_ADDR_PSMX2,
	FI_ADDR_IB_UD,
	FI_ADDR_EFA,
	FI_ADDR_PSMX3,
	FI_ADDR_OPX,
	FI_ADDR_CXI,
	FI_ADDR_UCX,    /* API 2.x */
	FI_SOCKADDR_IP, /* API 2.x: FI_SOCKADDR_IN or FI_SOCKADDR_IN6 */
};

/* Address-vector handle of a peer, and the "none" values for it and MR keys. */
typedef uint64_t fi_addr_t;

#define FI_ADDR_UNSPEC    ((uint64_t)-1)
#define FI_ADDR_NOTAVAIL  ((uint64_t)-1)
#define FI_KEY_NOTAVAIL   ((uint64_t)-1)
#define FI_SHARED_CONTEXT SIZE_MAX
/* API 2.x: an endpoint's auth_key_size that means "the AV's keys". */
#define FI_AV_AUTH_KEY SIZE_MAX

/* Element of an atomic operand list: count datatype-sized items at addr. */
struct fi_ioc {
	void *addr;
	size_t count;
};

/* ---- Attribute enumerations ----------------------------------------------- */

enum fi_av_type { FI_AV_UNSPEC, FI_AV_MAP, FI_AV_TABLE };

/*
 * Memory registration mode, a bit mask.  Before 1.5 it was an enum of two
 * exclusive values, FI_MR_BASIC and FI_MR_SCALABLE; they keep their values
 * as bits 0 and 1, deprecated.
 */
#define FI_MR_UNSPEC   FI_DEPRECATED_NAME("GCC warning \"FI_MR_UNSPEC is deprecated in the 2.x API\"") (0)
#define FI_MR_BASIC    FI_DEPRECATED_NAME("GCC warning \"FI_MR_BASIC is deprecated in the 2.x API\"") (1 << 0)
#define FI_MR_SCALABLE FI_DEPRECATED_NAME("GCC warning \"FI_MR_SCALABLE is deprecated in the 2.x API\"") (1 << 1)
/* The 1.x enum's name, kept so that 1.x code naming the type compiles. */
enum fi_mr_mode { FI_MR_MODE_1X_ };

#define FI_MR_LOCAL      (1 << 2)
#define FI_MR_RAW        (1 << 3)
#define FI_MR_VIRT_ADDR  (1 << 4)
#define FI_MR_ALLOCATED  (1 << 5)
#define FI_MR_PROV_KEY   (1 << 6)
#define FI_MR_MMU_NOTIFY (1 << 7)
#define FI_MR_RMA_EVENT  (1 << 8)
#define FI_MR_ENDPOINT   (1 << 9)
#define FI_MR_HMEM       (1 << 10)
#define FI_MR_COLLECTIVE (1 << 11)

enum fi_progress {
	FI_PROGRESS_UNSPEC,
	FI_PROGRESS_AUTO,
	FI_PROGRESS_MANUAL,
	FI_PROGRESS_CONTROL_UNIFIED, /* API 2.x: control progress rides data's */
};

enum fi_threading {
	FI_THREAD_UNSPEC,
	FI_THREAD_SAFE,
	FI_THREAD_FID,
	FI_THREAD_DOMAIN,
	FI_THREAD_COMPLETION,
	FI_THREAD_ENDPOINT,
};

enum fi_resource_mgmt { FI_RM_UNSPEC, FI_RM_DISABLED, FI_RM_ENABLED };

/*
 * Ordering guarantees (msg_order, comp_order).  The low nine bits are
 * "X after Y" for X, Y in {Read, Write, Send}; bits 32-39 are the same
 * question asked separately for RMA and for atomics.
 */
#define FI_ORDER_NONE   FI_DEPRECATED_NAME("GCC warning \"FI_ORDER_NONE is deprecated in the 2.x API\"") 0ULL
#define FI_ORDER_RAR    (1ULL << 0)
#define FI_ORDER_RAW    (1ULL << 1)
#define FI_ORDER_RAS    (1ULL << 2)
#define FI_ORDER_WAR    (1ULL << 3)
#define FI_ORDER_WAW    (1ULL << 4)
#define FI_ORDER_WAS    (1ULL << 5)
#define FI_ORDER_SAR    (1ULL << 6)
#define FI_ORDER_SAW    (1ULL << 7)
#define FI_ORDER_SAS    (1ULL << 8)
#define FI_ORDER_STRICT FI_DEPRECATED_NAME("GCC warning \"FI_ORDER_STRICT is deprecated in the 2.x API\"") 0x1FF

/* Data placement order, for comp_order. */
#define FI_ORDER_DATA FI_DEPRECATED_NAME("GCC warning \"FI_ORDER_DATA is deprecated in the 2.x API\"") (1ULL << 16)

#define FI_ORDER_RMA_RAR    (1ULL << 32)
#define FI_ORDER_RMA_RAW    (1ULL << 33)
#define FI_ORDER_RMA_WAR    (1ULL << 34)
#define FI_ORDER_RMA_WAW    (1ULL << 35)
#define FI_ORDER_ATOMIC_RAR (1ULL << 36)
#define FI_ORDER_ATOMIC_RAW (1ULL << 37)
#define FI_ORDER_ATOMIC_WAR (1ULL << 38)
#define FI_ORDER_ATOMIC_WAW (1ULL << 39)

enum fi_ep_type {
	FI_EP_UNSPEC,
	FI_EP_MSG,
	FI_EP_DGRAM,
	FI_EP_RDM,
	FI_EP_SOCK_STREAM,
	FI_EP_SOCK_DGRAM,
};

/*
 * Wire protocol of an endpoint (fi_ep_attr::protocol).  Entries for retired
 * providers (MXM, GNI, ...) keep their slot: the numbering is ABI.
 */
enum {
	FI_PROTO_UNSPEC,
	FI_PROTO_RDMA_CM_IB_RC,
	FI_PROTO_IWARP,
	FI_PROTO_IB_UD,
	FI_PROTO_PSMX,
	FI_PROTO_UDP,
	FI_PROTO_SOCK_TCP,
	FI_PROTO_MXM,
	FI_PROTO_IWARP_RDM,
	FI_PROTO_IB_RDM,
	FI_PROTO_GNI,
	FI_PROTO_RXM,
	FI_PROTO_RXD,
	FI_PROTO_MLX,
	FI_PROTO_NETWORKDIRECT,
	FI_PROTO_PSMX2,
	FI_PROTO_SHM,
	FI_PROTO_MRAIL,
	FI_PROTO_RSTREAM,
	FI_PROTO_RDMA_CM_IB_XRC,
	FI_PROTO_EFA,
	FI_PROTO_PSMX3,
	FI_PROTO_RXM_TCP,
	FI_PROTO_OPX,
	FI_PROTO_CXI,
	FI_PROTO_XNET,
	/* API 2.x */
	FI_PROTO_COLL,
	FI_PROTO_UCX,
	FI_PROTO_SM2,
	FI_PROTO_CXI_RNR,
	FI_PROTO_LPP,
	FI_PROTO_LNX,
};

/* API 2.x: tag formats (ep_attr::mem_tag_format may name one). */
enum {
	FI_TAG_BITS,
	FI_TAG_MPI,
	FI_TAG_CCL,
	FI_TAG_MAX_FORMAT = (1ULL << 16),
};

/*
 * Traffic class (tx_attr::tclass, domain_attr::tclass).  Either a raw DSCP
 * value tagged with FI_TC_DSCP, or one of the abstract labels.
 */
enum {
	FI_TC_UNSPEC = 0,
	FI_TC_DSCP = 0x100,
	FI_TC_LABEL = 0x200,
	FI_TC_BEST_EFFORT = FI_TC_LABEL,
	FI_TC_LOW_LATENCY,
	FI_TC_DEDICATED_ACCESS,
	FI_TC_BULK_DATA,
	FI_TC_SCAVENGER,
	FI_TC_NETWORK_CTRL,
};

static inline uint32_t fi_tc_dscp_set(uint8_t dscp)
{
	return (uint32_t)dscp | FI_TC_DSCP;
}

/* Yields 0 for a label-style class, which has no DSCP. */
static inline uint8_t fi_tc_dscp_get(uint32_t tclass)
{
	if (tclass & FI_TC_DSCP)
		return (uint8_t)tclass;
	return 0;
}

/* ---- The fi_info attribute tree ----------------------------------------- */

struct fi_tx_attr {
	uint64_t caps;
	uint64_t mode;
	uint64_t op_flags;
	uint64_t msg_order;
	uint64_t comp_order;
	size_t inject_size;
	size_t size;
	size_t iov_limit;
	size_t rma_iov_limit;
	uint32_t tclass;
};

struct fi_rx_attr {
	uint64_t caps;
	uint64_t mode;
	uint64_t op_flags;
	uint64_t msg_order;
	uint64_t comp_order;
	size_t total_buffered_recv;
	size_t size;
	size_t iov_limit;
};

struct fi_ep_attr {
	enum fi_ep_type type;
	uint32_t protocol;
	uint32_t protocol_version;
	size_t max_msg_size;
	size_t msg_prefix_size;
	size_t max_order_raw_size;
	size_t max_order_war_size;
	size_t max_order_waw_size;
	uint64_t mem_tag_format;
	size_t tx_ctx_cnt;
	size_t rx_ctx_cnt;
	size_t auth_key_size;
	uint8_t *auth_key;
};

struct fi_domain_attr {
	struct fid_domain *domain;
	char *name;
	enum fi_threading threading;
	enum fi_progress control_progress;
	/* API 2.x names the field progress; both are the same storage. */
	union {
		enum fi_progress data_progress;
		enum fi_progress progress;
	};
	enum fi_resource_mgmt resource_mgmt;
	enum fi_av_type av_type;
	int mr_mode; /* FI_MR_* bits, see enum fi_mr_mode */
	size_t mr_key_size;
	size_t cq_data_size;
	size_t cq_cnt;
	size_t ep_cnt;
	size_t tx_ctx_cnt;
	size_t rx_ctx_cnt;
	size_t max_ep_tx_ctx;
	size_t max_ep_rx_ctx;
	size_t max_ep_stx_ctx;
	size_t max_ep_srx_ctx;
	size_t cntr_cnt;
	size_t mr_iov_limit;
	uint64_t caps;
	uint64_t mode;
	uint8_t *auth_key;
	size_t auth_key_size;
	size_t max_err_data;
	size_t mr_cnt;
	uint32_t tclass;
	/* Appended by later APIs (symbol versions FABRIC_1.7, 1.8, 1.9): a
	 * binary built against older headers has a shorter structure, which
	 * its versioned entry points never read or write past. */
	size_t max_ep_auth_key;
	uint32_t max_group_id;
	uint64_t max_cntr_value;
	uint64_t max_err_cntr_value;
};

struct fi_fabric_attr {
	struct fid_fabric *fabric;
	char *name;
	char *prov_name;
	uint32_t prov_version;
	uint32_t api_version;
};

/* One candidate configuration returned by fi_getinfo; a list via next. */
struct fi_info {
	struct fi_info *next;
	uint64_t caps;
	uint64_t mode;
	uint32_t addr_format;
	size_t src_addrlen;
	size_t dest_addrlen;
	void *src_addr;
	void *dest_addr;
	fid_t handle; /* passive endpoint or connection request, if any */
	struct fi_tx_attr *tx_attr;
	struct fi_rx_attr *rx_attr;
	struct fi_ep_attr *ep_attr;
	struct fi_domain_attr *domain_attr;
	struct fi_fabric_attr *fabric_attr;
	struct fid_nic *nic;
};

/* ---- NIC description (fi_info::nic, see fi_nic(7)) ------------------------ */

struct fi_device_attr {
	char *name;
	char *device_id;
	char *device_version;
	char *vendor_id;
	char *driver;
	char *firmware;
};

enum fi_bus_type {
	FI_BUS_UNSPEC,
	FI_BUS_UNKNOWN = FI_BUS_UNSPEC,
	FI_BUS_PCI,
};

struct fi_pci_attr {
	uint16_t domain_id;
	uint8_t bus_id;
	uint8_t device_id;
	uint8_t function_id;
};

struct fi_bus_attr {
	enum fi_bus_type bus_type;
	union {
		struct fi_pci_attr pci;
	} attr;
};

enum fi_link_state {
	FI_LINK_UNKNOWN,
	FI_LINK_DOWN,
	FI_LINK_UP,
};

struct fi_link_attr {
	char *address;
	size_t mtu;
	size_t speed; /* bits per second */
	enum fi_link_state state;
	char *network_type;
};

/* ---- Fabric identifiers (fid) --------------------------------------------- */

/* fid::fclass: what kind of object a struct fid heads. */
enum {
	FI_CLASS_UNSPEC,
	FI_CLASS_FABRIC,
	FI_CLASS_DOMAIN,
	FI_CLASS_EP,
	FI_CLASS_SEP,
	FI_CLASS_RX_CTX,
	FI_CLASS_SRX_CTX,
	FI_CLASS_TX_CTX,
	FI_CLASS_STX_CTX,
	FI_CLASS_PEP,
	FI_CLASS_INTERFACE,
	FI_CLASS_AV,
	FI_CLASS_MR,
	FI_CLASS_EQ,
	FI_CLASS_CQ,
	FI_CLASS_CNTR,
	FI_CLASS_WAIT,
	FI_CLASS_POLL,
	FI_CLASS_CONNREQ,
	FI_CLASS_MC,
	FI_CLASS_NIC,
	FI_CLASS_AV_SET,
	FI_CLASS_MR_CACHE,
	FI_CLASS_MEM_MONITOR,
	FI_CLASS_PEER_CQ,
	FI_CLASS_PEER_SRX,
	FI_CLASS_LOG,
	FI_CLASS_PEER_AV,
	FI_CLASS_PEER_AV_SET,
	FI_CLASS_PEER_CNTR, /* API 2.x */
	FI_CLASS_PROFILE,   /* API 2.x */
};

/*
 * Operations every object answers.  Each ops table starts with its own size
 * so that entries appended in later versions can be probed with FI_CHECK_OP
 * before a caller compiled against new headers uses them on an old provider.
 */
struct fi_ops {
	size_t size;
	int (*close)(struct fid *fid);
	int (*bind)(struct fid *fid, struct fid *bfid, uint64_t flags);
	int (*control)(struct fid *fid, int command, void *arg);
	int (*ops_open)(struct fid *fid, const char *name, uint64_t flags, void **ops,
	                void *context);
	int (*tostr)(const struct fid *fid, char *buf, size_t len);
	int (*ops_set)(struct fid *fid, const char *name, uint64_t flags, void *ops,
	               void *context);
};

/* First member of every fabric object, so any of them can be passed as one. */
struct fid {
	size_t fclass;
	void *context;
	struct fi_ops *ops;
};

/* True when the table is present, long enough to hold op, and op is set. */
#define FI_CHECK_OP(ops, opstype, op)                                                    \
	((ops) && ((ops)->size > offsetof(opstype, op)) && (ops)->op)

/* ---- Discovery -------------------------------------------------------------- */

int fi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
               const struct fi_info *hints, struct fi_info **info);
void fi_freeinfo(struct fi_info *info);
struct fi_info *fi_dupinfo(const struct fi_info *info);

/* A zeroed fi_info with every attribute sub-structure allocated. */
static inline struct fi_info *fi_allocinfo(void)
{
	return fi_dupinfo(NULL);
}

/* ---- Fabric object ---------------------------------------------------------- */

struct fi_ops_fabric {
	size_t size;
	int (*domain)(struct fid_fabric *fabric, struct fi_info *info,
	              struct fid_domain **dom, void *context);
	int (*passive_ep)(struct fid_fabric *fabric, struct fi_info *info,
	                  struct fid_pep **pep, void *context);
	int (*eq_open)(struct fid_fabric *fabric, struct fi_eq_attr *attr,
	               struct fid_eq **eq, void *context);
	int (*wait_open)(struct fid_fabric *fabric, struct fi_wait_attr *attr,
	                 struct fid_wait **waitset);
	int (*trywait)(struct fid_fabric *fabric, struct fid **fids, int count);
	int (*domain2)(struct fid_fabric *fabric, struct fi_info *info,
	               struct fid_domain **dom, uint64_t flags, void *context);
};

struct fid_fabric {
	struct fid fid;
	struct fi_ops_fabric *ops;
	uint32_t api_version; /* the version the application asked for */
};

int fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
/* Opens the fabric an fi_info entry from fi_getinfo names (API 2.0);
 * flags must be 0. */
int fi_fabric2(struct fi_info *info, struct fid_fabric **fabric, uint64_t flags,
               void *context);

/* Opens a library-level object by name (e.g. "mr_cache", "logging"). */
int fi_open(uint32_t version, const char *name, void *attr, size_t attr_len,
            uint64_t flags, struct fid **fid, void *context);

struct fid_nic {
	struct fid fid;
	struct fi_device_attr *device_attr;
	struct fi_bus_attr *bus_attr;
	struct fi_link_attr *link_attr;
	void *prov_attr;
};

/* ---- Generic object calls: close, control and its wrappers, ops ---------- */

static inline int fi_close(struct fid *fid)
{
	return fid->ops->close(fid);
}

/* fi_control commands; the comment gives what arg points at. */
enum {
	FI_GETFIDFLAG,  /* uint64_t */
	FI_SETFIDFLAG,  /* uint64_t */
	FI_GETOPSFLAG,  /* uint64_t */
	FI_SETOPSFLAG,  /* uint64_t */
	FI_ALIAS,       /* struct fi_alias */
	FI_GETWAIT,     /* the native wait object (fd, mutex/cond pair...) */
	FI_ENABLE,      /* nothing */
	FI_BACKLOG,     /* int */
	FI_GET_RAW_MR,  /* struct fi_mr_raw_attr */
	FI_MAP_RAW_MR,  /* struct fi_mr_map_raw */
	FI_UNMAP_KEY,   /* uint64_t key */
	FI_QUEUE_WORK,  /* struct fi_deferred_work */
	FI_CANCEL_WORK, /* struct fi_deferred_work */
	FI_FLUSH_WORK,  /* nothing */
	FI_REFRESH,     /* struct fi_mr_modify */
	FI_DUP,         /* struct fid * */
	FI_GETWAITOBJ,  /* enum fi_wait_obj */
	FI_GET_VAL,     /* struct fi_fid_var */
	FI_SET_VAL,     /* struct fi_fid_var */
	FI_EXPORT_FID,  /* struct fi_fid_export */
	FI_GET_FD,      /* int (API 2.x) */
};

struct fi_alias {
	struct fid **fid;
	uint64_t flags;
};

/* Named attribute of an object; no common names exist yet, so every name
 * carries FI_PROV_SPECIFIC. */
struct fi_fid_var {
	int name;
	void *val;
};

/* FI_GET_RAW_MR: fetch the raw (over 64-bit) key of a registration. */
struct fi_mr_raw_attr {
	uint64_t flags;
	uint64_t *base_addr;
	uint8_t *raw_key;
	size_t *key_size;
};

/* FI_MAP_RAW_MR: turn a peer's raw key into a uint64_t usable in RMA calls. */
struct fi_mr_map_raw {
	uint64_t flags;
	uint64_t base_addr;
	uint8_t *raw_key;
	size_t key_size;
	uint64_t *key;
};

static inline int fi_control(struct fid *fid, int command, void *arg)
{
	return fid->ops->control(fid, command, arg);
}

static inline int fi_alias(struct fid *fid, struct fid **alias_fid, uint64_t flags)
{
	struct fi_alias req;

	req.fid = alias_fid;
	req.flags = flags;
	return fi_control(fid, FI_ALIAS, &req);
}

static inline int fi_get_val(struct fid *fid, int name, void *val)
{
	struct fi_fid_var var;

	var.name = name;
	var.val = val;
	return fi_control(fid, FI_GET_VAL, &var);
}

static inline int fi_set_val(struct fid *fid, int name, void *val)
{
	struct fi_fid_var var;

	var.name = name;
	var.val = val;
	return fi_control(fid, FI_SET_VAL, &var);
}

static inline int fi_open_ops(struct fid *fid, const char *name, uint64_t flags,
                              void **ops, void *context)
{
	return fid->ops->ops_open(fid, name, flags, ops, context);
}

/* ops_set was appended to fi_ops in 1.11; older objects lack it. */
static inline int fi_set_ops(struct fid *fid, const char *name, uint64_t flags, void *ops,
                             void *context)
{
	if (!FI_CHECK_OP(fid->ops, struct fi_ops, ops_set))
		return -FI_ENOSYS;
	return fid->ops->ops_set(fid, name, flags, ops, context);
}

/* ---- Printing (fi_tostr) ---------------------------------------------------- */

enum fi_type {
	FI_TYPE_INFO,
	FI_TYPE_EP_TYPE,
	FI_TYPE_CAPS,
	FI_TYPE_OP_FLAGS,
	FI_TYPE_ADDR_FORMAT,
	FI_TYPE_TX_ATTR,
	FI_TYPE_RX_ATTR,
	FI_TYPE_EP_ATTR,
	FI_TYPE_DOMAIN_ATTR,
	FI_TYPE_FABRIC_ATTR,
	FI_TYPE_THREADING,
	FI_TYPE_PROGRESS,
	FI_TYPE_PROTOCOL,
	FI_TYPE_MSG_ORDER,
	FI_TYPE_MODE,
	FI_TYPE_AV_TYPE,
	FI_TYPE_ATOMIC_TYPE,
	FI_TYPE_ATOMIC_OP,
	FI_TYPE_VERSION,
	FI_TYPE_EQ_EVENT,
	FI_TYPE_CQ_EVENT_FLAGS,
	FI_TYPE_MR_MODE,
	FI_TYPE_OP_TYPE,
	FI_TYPE_FID,
	FI_TYPE_COLLECTIVE_OP,
	FI_TYPE_HMEM_IFACE,
	FI_TYPE_CQ_FORMAT,
	FI_TYPE_LOG_LEVEL,
	FI_TYPE_LOG_SUBSYS,
	/* API 2.x */
	FI_TYPE_AV_ATTR,
	FI_TYPE_CQ_ATTR,
	FI_TYPE_MR_ATTR,
	FI_TYPE_CNTR_ATTR,
	FI_TYPE_CQ_ERR_ENTRY,
	FI_TYPE_CQ_WAIT_COND,
	FI_TYPE_WAIT_OBJ,
};

/* fi_tostr uses one static buffer (not thread safe); fi_tostr_r writes into
 * the caller's and returns it. */
char *fi_tostr(const void *data, enum fi_type datatype);
char *fi_tostr_r(char *buf, size_t len, const void *data, enum fi_type datatype);

/* ---- Configuration parameters (FI_<PROV>_<NAME> variables) ---------------- */

enum fi_param_type {
	FI_PARAM_STRING,
	FI_PARAM_INT,
	FI_PARAM_BOOL,
	FI_PARAM_SIZE_T,
};

struct fi_param {
	const char *name;
	enum fi_param_type type;
	const char *help_string;
	const char *value; /* current environment value, or NULL when unset */
};

int fi_getparams(struct fi_param **params, int *count);
void fi_freeparams(struct fi_param *params);

/* ---- Operation contexts ----------------------------------------------------- */

/* Scratch space the application lends the provider with each operation when
 * fi_info::mode has FI_CONTEXT (or FI_CONTEXT2); it must stay untouched until
 * the operation completes. */
struct fi_context {
	void *internal[4];
};

struct fi_context2 {
	void *internal[8];
};

/* Context reported for FI_BUFFERED_RECV completions, naming the endpoint. */
struct fi_recv_context {
	struct fid_ep *ep;
	void *context;
};

#ifdef __cplusplus
}
#endif

#endif /* LOOM_RDMA_FABRIC_H */
