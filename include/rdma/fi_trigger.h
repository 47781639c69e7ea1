/* fi_trigger.h - triggered operations (held back until a counter or a device
 * signal fires) and the deferred work requests queued on a domain. */
#ifndef LOOM_RDMA_FI_TRIGGER_H
#define LOOM_RDMA_FI_TRIGGER_H

#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_atomic.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Trigger conditions ---------------------------------------------------- */

enum fi_trigger_event {
	FI_TRIGGER_THRESHOLD,
	FI_TRIGGER_XPU,
};

/* Fires once the counter (successes plus errors) reaches threshold. */
struct fi_trigger_threshold {
	struct fid_cntr *cntr;
	size_t threshold;
};

/* One location a device must write to release an XPU-triggered transfer.
 * The provider fills it in: count values of datatype go to addr, taken from
 * the matching val* member when count is 1 and from data otherwise. */
struct fi_trigger_var {
	enum fi_datatype datatype;
	int count;
	void *addr;
	union {
		uint8_t val8;
		uint16_t val16;
		uint32_t val32;
		uint64_t val64;
		uint8_t *data;
	} value;
};

/* Names the device that will release the transfer and lends the provider an
 * array of var, count entries long, to describe what that device must write.
 * The provider lowers count to the number of entries it used. */
struct fi_trigger_xpu {
	int count;
	enum fi_hmem_iface iface;
	union {
		uint64_t reserved;
		int cuda;
		int ze;
	} device;
	struct fi_trigger_var *var;
};

/*
 * Passed as the operation context together with the FI_TRIGGER flag.  Each
 * variant is exactly as large as the fi_context / fi_context2 it stands in
 * for, since a provider with FI_CONTEXT or FI_CONTEXT2 mode uses that space
 * as its own scratch area; the internal arrays pin the size.
 */
struct fi_triggered_context {
	enum fi_trigger_event event_type;
	union {
		struct fi_trigger_threshold threshold;
		struct fi_trigger_xpu xpu;
		void *internal[3];
	} trigger;
};

struct fi_triggered_context2 {
	enum fi_trigger_event event_type;
	union {
		struct fi_trigger_threshold threshold;
		struct fi_trigger_xpu xpu;
		void *internal[7];
	} trigger;
};

/* ---- Deferred work (fi_control(domain, FI_QUEUE_WORK, work)) ---------------- */

/* Which member of fi_deferred_work.op is in use. */
enum fi_op_type {
	FI_OP_RECV,
	FI_OP_SEND,
	FI_OP_TRECV,
	FI_OP_TSEND,
	FI_OP_READ,
	FI_OP_WRITE,
	FI_OP_ATOMIC,
	FI_OP_FETCH_ATOMIC,
	FI_OP_COMPARE_ATOMIC,
	FI_OP_CNTR_SET,
	FI_OP_CNTR_ADD,
};

/* Each operation is described exactly as its *msg call would take it. */
struct fi_op_msg {
	struct fid_ep *ep;
	struct fi_msg msg;
	uint64_t flags;
};

struct fi_op_tagged {
	struct fid_ep *ep;
	struct fi_msg_tagged msg;
	uint64_t flags;
};

struct fi_op_rma {
	struct fid_ep *ep;
	struct fi_msg_rma msg;
	uint64_t flags;
};

struct fi_op_atomic {
	struct fid_ep *ep;
	struct fi_msg_atomic msg;
	uint64_t flags;
};

struct fi_op_fetch_atomic {
	struct fid_ep *ep;
	struct fi_msg_atomic msg;
	struct fi_msg_fetch fetch;
	uint64_t flags;
};

struct fi_op_compare_atomic {
	struct fid_ep *ep;
	struct fi_msg_atomic msg;
	struct fi_msg_fetch fetch;
	struct fi_msg_compare compare;
	uint64_t flags;
};

/* FI_OP_CNTR_SET / FI_OP_CNTR_ADD: set or add value to cntr. */
struct fi_op_cntr {
	struct fid_cntr *cntr;
	uint64_t value;
};

/*
 * A request queued on a domain: once triggering_cntr reaches threshold the
 * operation in op runs, and completion_cntr is bumped by one when it ends
 * (counter operations excepted).  The request and what op points to belong
 * to the provider until the work completes or is cancelled; context is the
 * provider's bookkeeping space.
 */
struct fi_deferred_work {
	struct fi_context2 context;

	uint64_t threshold;
	struct fid_cntr *triggering_cntr;
	struct fid_cntr *completion_cntr;

	enum fi_op_type op_type;

	union {
		struct fi_op_msg *msg;
		struct fi_op_tagged *tagged;
		struct fi_op_rma *rma;
		struct fi_op_atomic *atomic;
		struct fi_op_fetch_atomic *fetch_atomic;
		struct fi_op_compare_atomic *compare_atomic;
		struct fi_op_cntr *cntr;
	} op;
};

#ifdef __cplusplus
}
#endif

#endif /* LOOM_RDMA_FI_TRIGGER_H */
