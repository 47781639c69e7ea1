/* atomic.c - fi_atomic over the engine.  Not written yet: every call is
 * -FI_ENOSYS, the *valid queries -FI_EOPNOTSUPP (providers do not
 * advertise FI_ATOMIC), and atomic packets that arrive are dropped. */
#include "rdm.h"

void lm_rdm_atomic_recv(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                        const struct lm_rdm_hdr *h, const void *payload, size_t plen)
{
	(void)ep, (void)peer, (void)h, (void)payload, (void)plen;
}

static ssize_t no_write(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                        fi_addr_t dest, uint64_t addr, uint64_t key, enum fi_datatype dt,
                        enum fi_op op, void *context)
{
	(void)ep, (void)buf, (void)count, (void)desc, (void)dest, (void)addr, (void)key,
	    (void)dt, (void)op, (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_writev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
                         size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
                         enum fi_datatype dt, enum fi_op op, void *context)
{
	(void)ep, (void)iov, (void)desc, (void)count, (void)dest, (void)addr, (void)key,
	    (void)dt, (void)op, (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_writemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                           uint64_t flags)
{
	(void)ep, (void)msg, (void)flags;
	return -FI_ENOSYS;
}

static ssize_t no_inject(struct fid_ep *ep, const void *buf, size_t count, fi_addr_t dest,
                         uint64_t addr, uint64_t key, enum fi_datatype dt, enum fi_op op)
{
	(void)ep, (void)buf, (void)count, (void)dest, (void)addr, (void)key, (void)dt,
	    (void)op;
	return -FI_ENOSYS;
}

static ssize_t no_readwrite(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                            void *result, void *result_desc, fi_addr_t dest,
                            uint64_t addr, uint64_t key, enum fi_datatype dt,
                            enum fi_op op, void *context)
{
	(void)ep, (void)buf, (void)count, (void)desc, (void)result, (void)result_desc,
	    (void)dest, (void)addr, (void)key, (void)dt, (void)op, (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_readwritev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
                             size_t count, struct fi_ioc *resultv, void **result_desc,
                             size_t result_count, fi_addr_t dest, uint64_t addr,
                             uint64_t key, enum fi_datatype dt, enum fi_op op,
                             void *context)
{
	(void)ep, (void)iov, (void)desc, (void)count, (void)resultv, (void)result_desc,
	    (void)result_count, (void)dest, (void)addr, (void)key, (void)dt, (void)op,
	    (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_readwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                               struct fi_ioc *resultv, void **result_desc,
                               size_t result_count, uint64_t flags)
{
	(void)ep, (void)msg, (void)resultv, (void)result_desc, (void)result_count,
	    (void)flags;
	return -FI_ENOSYS;
}

static ssize_t no_compwrite(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                            const void *compare, void *compare_desc, void *result,
                            void *result_desc, fi_addr_t dest, uint64_t addr,
                            uint64_t key, enum fi_datatype dt, enum fi_op op,
                            void *context)
{
	(void)ep, (void)buf, (void)count, (void)desc, (void)compare, (void)compare_desc,
	    (void)result, (void)result_desc, (void)dest, (void)addr, (void)key, (void)dt,
	    (void)op, (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_compwritev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
                             size_t count, const struct fi_ioc *comparev,
                             void **compare_desc, size_t compare_count,
                             struct fi_ioc *resultv, void **result_desc,
                             size_t result_count, fi_addr_t dest, uint64_t addr,
                             uint64_t key, enum fi_datatype dt, enum fi_op op,
                             void *context)
{
	(void)ep, (void)iov, (void)desc, (void)count, (void)comparev, (void)compare_desc,
	    (void)compare_count, (void)resultv, (void)result_desc, (void)result_count,
	    (void)dest, (void)addr, (void)key, (void)dt, (void)op, (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_compwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                               const struct fi_ioc *comparev, void **compare_desc,
                               size_t compare_count, struct fi_ioc *resultv,
                               void **result_desc, size_t result_count, uint64_t flags)
{
	(void)ep, (void)msg, (void)comparev, (void)compare_desc, (void)compare_count,
	    (void)resultv, (void)result_desc, (void)result_count, (void)flags;
	return -FI_ENOSYS;
}

static int no_valid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op, size_t *count)
{
	(void)ep, (void)dt, (void)op, (void)count;
	return -FI_EOPNOTSUPP;
}

const struct fi_ops_atomic lm_rdm_atomic_ops = {
    .size = sizeof(struct fi_ops_atomic),
    .write = no_write,
    .writev = no_writev,
    .writemsg = no_writemsg,
    .inject = no_inject,
    .readwrite = no_readwrite,
    .readwritev = no_readwritev,
    .readwritemsg = no_readwritemsg,
    .compwrite = no_compwrite,
    .compwritev = no_compwritev,
    .compwritemsg = no_compwritemsg,
    .writevalid = no_valid,
    .readwritevalid = no_valid,
    .compwritevalid = no_valid,
};
