/* nosys.c - ops whose every call answers -FI_ENOSYS, for objects that are
 * a struct fid_ep but do not connect, or do no RMA or atomics (an RDM
 * endpoint's connection calls, a shared receive context): the headers'
 * inline calls jump through these slots without a NULL check. */
#include "util.h"

static int no_setname(fid_t fid, void *addr, size_t addrlen)
{
	(void)fid, (void)addr, (void)addrlen;
	return -FI_ENOSYS;
}

static int no_getname(fid_t fid, void *addr, size_t *addrlen)
{
	(void)fid, (void)addr, (void)addrlen;
	return -FI_ENOSYS;
}

int lm_cm_no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen)
{
	(void)ep, (void)addr, (void)addrlen;
	return -FI_ENOSYS;
}

int lm_cm_no_connect(struct fid_ep *ep, const void *addr, const void *param,
                      size_t paramlen)
{
	(void)ep, (void)addr, (void)param, (void)paramlen;
	return -FI_ENOSYS;
}

int lm_cm_no_listen(struct fid_pep *pep)
{
	(void)pep;
	return -FI_ENOSYS;
}

int lm_cm_no_accept(struct fid_ep *ep, const void *param, size_t paramlen)
{
	(void)ep, (void)param, (void)paramlen;
	return -FI_ENOSYS;
}

int lm_cm_no_reject(struct fid_pep *pep, fid_t handle, const void *param,
                     size_t paramlen)
{
	(void)pep, (void)handle, (void)param, (void)paramlen;
	return -FI_ENOSYS;
}

int lm_cm_no_shutdown(struct fid_ep *ep, uint64_t flags)
{
	(void)ep, (void)flags;
	return -FI_ENOSYS;
}

int lm_cm_no_join(struct fid_ep *ep, const void *addr, uint64_t flags,
                   struct fid_mc **mc, void *context)
{
	(void)ep, (void)addr, (void)flags, (void)mc, (void)context;
	return -FI_ENOSYS;
}

int lm_ep_no_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr,
                    struct fid_ep **tx_ep, void *context)
{
	(void)sep, (void)index, (void)attr, (void)tx_ep, (void)context;
	return -FI_ENOSYS;
}

int lm_ep_no_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr,
                    struct fid_ep **rx_ep, void *context)
{
	(void)sep, (void)index, (void)attr, (void)rx_ep, (void)context;
	return -FI_ENOSYS;
}

const struct fi_ops_cm lm_nosys_cm_ops = {
    .size = sizeof(struct fi_ops_cm),
    .setname = no_setname,
    .getname = no_getname,
    .getpeer = lm_cm_no_getpeer,
    .connect = lm_cm_no_connect,
    .listen = lm_cm_no_listen,
    .accept = lm_cm_no_accept,
    .reject = lm_cm_no_reject,
    .shutdown = lm_cm_no_shutdown,
    .join = lm_cm_no_join,
};

/* ---- messages ---------------------------------------------------------------- */

ssize_t lm_msg_no_send(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                       fi_addr_t dest_addr, void *context)
{
	(void)fid, (void)buf, (void)len, (void)desc, (void)dest_addr, (void)context;
	return -FI_ENOSYS;
}

ssize_t lm_msg_no_sendv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                        size_t count, fi_addr_t dest_addr, void *context)
{
	(void)fid, (void)iov, (void)desc, (void)count, (void)dest_addr, (void)context;
	return -FI_ENOSYS;
}

ssize_t lm_msg_no_sendmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags)
{
	(void)fid, (void)msg, (void)flags;
	return -FI_ENOSYS;
}

ssize_t lm_msg_no_inject(struct fid_ep *fid, const void *buf, size_t len,
                         fi_addr_t dest_addr)
{
	(void)fid, (void)buf, (void)len, (void)dest_addr;
	return -FI_ENOSYS;
}

ssize_t lm_msg_no_senddata(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                           uint64_t data, fi_addr_t dest_addr, void *context)
{
	(void)fid, (void)buf, (void)len, (void)desc, (void)data, (void)dest_addr,
	    (void)context;
	return -FI_ENOSYS;
}

ssize_t lm_msg_no_injectdata(struct fid_ep *fid, const void *buf, size_t len,
                             uint64_t data, fi_addr_t dest_addr)
{
	(void)fid, (void)buf, (void)len, (void)data, (void)dest_addr;
	return -FI_ENOSYS;
}

ssize_t lm_tagged_no_send(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                        fi_addr_t dest_addr, uint64_t tag, void *context)
{
	(void)fid, (void)buf, (void)len, (void)desc, (void)dest_addr, (void)tag,
	    (void)context;
	return -FI_ENOSYS;
}

ssize_t lm_tagged_no_sendv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                         size_t count, fi_addr_t dest_addr, uint64_t tag, void *context)
{
	(void)fid, (void)iov, (void)desc, (void)count, (void)dest_addr, (void)tag,
	    (void)context;
	return -FI_ENOSYS;
}

ssize_t lm_tagged_no_sendmsg(struct fid_ep *fid, const struct fi_msg_tagged *msg,
                           uint64_t flags)
{
	(void)fid, (void)msg, (void)flags;
	return -FI_ENOSYS;
}

ssize_t lm_tagged_no_inject(struct fid_ep *fid, const void *buf, size_t len,
                          fi_addr_t dest_addr, uint64_t tag)
{
	(void)fid, (void)buf, (void)len, (void)dest_addr, (void)tag;
	return -FI_ENOSYS;
}

ssize_t lm_tagged_no_senddata(struct fid_ep *fid, const void *buf, size_t len, void *desc,
                            uint64_t data, fi_addr_t dest_addr, uint64_t tag,
                            void *context)
{
	(void)fid, (void)buf, (void)len, (void)desc, (void)data, (void)dest_addr,
	    (void)tag, (void)context;
	return -FI_ENOSYS;
}

ssize_t lm_tagged_no_injectdata(struct fid_ep *fid, const void *buf, size_t len,
                              uint64_t data, fi_addr_t dest_addr, uint64_t tag)
{
	(void)fid, (void)buf, (void)len, (void)data, (void)dest_addr, (void)tag;
	return -FI_ENOSYS;
}

ssize_t lm_msg_no_recv(struct fid_ep *fid, void *buf, size_t len, void *desc,
                       fi_addr_t src_addr, void *context)
{
	(void)fid, (void)buf, (void)len, (void)desc, (void)src_addr, (void)context;
	return -FI_ENOSYS;
}

ssize_t lm_msg_no_recvv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                        size_t count, fi_addr_t src_addr, void *context)
{
	(void)fid, (void)iov, (void)desc, (void)count, (void)src_addr, (void)context;
	return -FI_ENOSYS;
}

ssize_t lm_msg_no_recvmsg(struct fid_ep *fid, const struct fi_msg *msg, uint64_t flags)
{
	(void)fid, (void)msg, (void)flags;
	return -FI_ENOSYS;
}

ssize_t lm_tagged_no_recv(struct fid_ep *fid, void *buf, size_t len, void *desc,
                          fi_addr_t src_addr, uint64_t tag, uint64_t ignore, void *context)
{
	(void)fid, (void)buf, (void)len, (void)desc, (void)src_addr, (void)tag,
	    (void)ignore, (void)context;
	return -FI_ENOSYS;
}

ssize_t lm_tagged_no_recvv(struct fid_ep *fid, const struct iovec *iov, void **desc,
                           size_t count, fi_addr_t src_addr, uint64_t tag,
                           uint64_t ignore, void *context)
{
	(void)fid, (void)iov, (void)desc, (void)count, (void)src_addr, (void)tag,
	    (void)ignore, (void)context;
	return -FI_ENOSYS;
}

ssize_t lm_tagged_no_recvmsg(struct fid_ep *fid, const struct fi_msg_tagged *msg,
                             uint64_t flags)
{
	(void)fid, (void)msg, (void)flags;
	return -FI_ENOSYS;
}

const struct fi_ops_msg lm_nosys_msg_ops = {
    .size = sizeof(struct fi_ops_msg),
    .recv = lm_msg_no_recv,
    .recvv = lm_msg_no_recvv,
    .recvmsg = lm_msg_no_recvmsg,
    .send = lm_msg_no_send,
    .sendv = lm_msg_no_sendv,
    .sendmsg = lm_msg_no_sendmsg,
    .inject = lm_msg_no_inject,
    .senddata = lm_msg_no_senddata,
    .injectdata = lm_msg_no_injectdata,
};

const struct fi_ops_tagged lm_nosys_tagged_ops = {
    .size = sizeof(struct fi_ops_tagged),
    .recv = lm_tagged_no_recv,
    .recvv = lm_tagged_no_recvv,
    .recvmsg = lm_tagged_no_recvmsg,
    .send = lm_tagged_no_send,
    .sendv = lm_tagged_no_sendv,
    .sendmsg = lm_tagged_no_sendmsg,
    .inject = lm_tagged_no_inject,
    .senddata = lm_tagged_no_senddata,
    .injectdata = lm_tagged_no_injectdata,
};

/* ---- RMA ------------------------------------------------------------------------ */

static ssize_t no_read(struct fid_ep *ep, void *buf, size_t len, void *desc,
                       fi_addr_t src_addr, uint64_t addr, uint64_t key, void *context)
{
	(void)ep, (void)buf, (void)len, (void)desc, (void)src_addr, (void)addr, (void)key,
	    (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_readv(struct fid_ep *ep, const struct iovec *iov, void **desc,
                        size_t count, fi_addr_t src_addr, uint64_t addr, uint64_t key,
                        void *context)
{
	(void)ep, (void)iov, (void)desc, (void)count, (void)src_addr, (void)addr,
	    (void)key, (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_rma_msg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags)
{
	(void)ep, (void)msg, (void)flags;
	return -FI_ENOSYS;
}

static ssize_t no_write(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                        fi_addr_t dest_addr, uint64_t addr, uint64_t key, void *context)
{
	(void)ep, (void)buf, (void)len, (void)desc, (void)dest_addr, (void)addr,
	    (void)key, (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_writev(struct fid_ep *ep, const struct iovec *iov, void **desc,
                         size_t count, fi_addr_t dest_addr, uint64_t addr, uint64_t key,
                         void *context)
{
	(void)ep, (void)iov, (void)desc, (void)count, (void)dest_addr, (void)addr,
	    (void)key, (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_rma_inject(struct fid_ep *ep, const void *buf, size_t len,
                             fi_addr_t dest_addr, uint64_t addr, uint64_t key)
{
	(void)ep, (void)buf, (void)len, (void)dest_addr, (void)addr, (void)key;
	return -FI_ENOSYS;
}

static ssize_t no_writedata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                            uint64_t data, fi_addr_t dest_addr, uint64_t addr,
                            uint64_t key, void *context)
{
	(void)ep, (void)buf, (void)len, (void)desc, (void)data, (void)dest_addr,
	    (void)addr, (void)key, (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_injectdata(struct fid_ep *ep, const void *buf, size_t len,
                             uint64_t data, fi_addr_t dest_addr, uint64_t addr,
                             uint64_t key)
{
	(void)ep, (void)buf, (void)len, (void)data, (void)dest_addr, (void)addr,
	    (void)key;
	return -FI_ENOSYS;
}

const struct fi_ops_rma lm_nosys_rma_ops = {
    .size = sizeof(struct fi_ops_rma),
    .read = no_read,
    .readv = no_readv,
    .readmsg = no_rma_msg,
    .write = no_write,
    .writev = no_writev,
    .writemsg = no_rma_msg,
    .inject = no_rma_inject,
    .writedata = no_writedata,
    .injectdata = no_injectdata,
};

static ssize_t no_atomic(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                         fi_addr_t dest_addr, uint64_t addr, uint64_t key,
                         enum fi_datatype datatype, enum fi_op op, void *context)
{
	(void)ep, (void)buf, (void)count, (void)desc, (void)dest_addr, (void)addr,
	    (void)key, (void)datatype, (void)op, (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_atomicv(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
                          size_t count, fi_addr_t dest_addr, uint64_t addr, uint64_t key,
                          enum fi_datatype datatype, enum fi_op op, void *context)
{
	(void)ep, (void)iov, (void)desc, (void)count, (void)dest_addr, (void)addr,
	    (void)key, (void)datatype, (void)op, (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_atomicmsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                            uint64_t flags)
{
	(void)ep, (void)msg, (void)flags;
	return -FI_ENOSYS;
}

static ssize_t no_atomic_inject(struct fid_ep *ep, const void *buf, size_t count,
                                fi_addr_t dest_addr, uint64_t addr, uint64_t key,
                                enum fi_datatype datatype, enum fi_op op)
{
	(void)ep, (void)buf, (void)count, (void)dest_addr, (void)addr, (void)key,
	    (void)datatype, (void)op;
	return -FI_ENOSYS;
}

static ssize_t no_fetch(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                        void *result, void *result_desc, fi_addr_t dest_addr,
                        uint64_t addr, uint64_t key, enum fi_datatype datatype,
                        enum fi_op op, void *context)
{
	(void)ep, (void)buf, (void)count, (void)desc, (void)result, (void)result_desc,
	    (void)dest_addr, (void)addr, (void)key, (void)datatype, (void)op,
	    (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_fetchv(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
                         size_t count, struct fi_ioc *resultv, void **result_desc,
                         size_t result_count, fi_addr_t dest_addr, uint64_t addr,
                         uint64_t key, enum fi_datatype datatype, enum fi_op op,
                         void *context)
{
	(void)ep, (void)iov, (void)desc, (void)count, (void)resultv, (void)result_desc,
	    (void)result_count, (void)dest_addr, (void)addr, (void)key, (void)datatype,
	    (void)op, (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_fetchmsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                           struct fi_ioc *resultv, void **result_desc,
                           size_t result_count, uint64_t flags)
{
	(void)ep, (void)msg, (void)resultv, (void)result_desc, (void)result_count,
	    (void)flags;
	return -FI_ENOSYS;
}

static ssize_t no_compare(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                          const void *compare, void *compare_desc, void *result,
                          void *result_desc, fi_addr_t dest_addr, uint64_t addr,
                          uint64_t key, enum fi_datatype datatype, enum fi_op op,
                          void *context)
{
	(void)ep, (void)buf, (void)count, (void)desc, (void)compare, (void)compare_desc,
	    (void)result, (void)result_desc, (void)dest_addr, (void)addr, (void)key,
	    (void)datatype, (void)op, (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_comparev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
                           size_t count, const struct fi_ioc *comparev,
                           void **compare_desc, size_t compare_count,
                           struct fi_ioc *resultv, void **result_desc,
                           size_t result_count, fi_addr_t dest_addr, uint64_t addr,
                           uint64_t key, enum fi_datatype datatype, enum fi_op op,
                           void *context)
{
	(void)ep, (void)iov, (void)desc, (void)count, (void)comparev, (void)compare_desc,
	    (void)compare_count, (void)resultv, (void)result_desc, (void)result_count,
	    (void)dest_addr, (void)addr, (void)key, (void)datatype, (void)op,
	    (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_comparemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                             const struct fi_ioc *comparev, void **compare_desc,
                             size_t compare_count, struct fi_ioc *resultv,
                             void **result_desc, size_t result_count, uint64_t flags)
{
	(void)ep, (void)msg, (void)comparev, (void)compare_desc, (void)compare_count,
	    (void)resultv, (void)result_desc, (void)result_count, (void)flags;
	return -FI_ENOSYS;
}

static int no_valid(struct fid_ep *ep, enum fi_datatype datatype, enum fi_op op,
                    size_t *count)
{
	(void)ep, (void)datatype, (void)op, (void)count;
	return -FI_ENOSYS;
}

const struct fi_ops_atomic lm_nosys_atomic_ops = {
    .size = sizeof(struct fi_ops_atomic),
    .write = no_atomic,
    .writev = no_atomicv,
    .writemsg = no_atomicmsg,
    .inject = no_atomic_inject,
    .readwrite = no_fetch,
    .readwritev = no_fetchv,
    .readwritemsg = no_fetchmsg,
    .compwrite = no_compare,
    .compwritev = no_comparev,
    .compwritemsg = no_comparemsg,
    .writevalid = no_valid,
    .readwritevalid = no_valid,
    .compwritevalid = no_valid,
};
