/* rma.c - fi_read/fi_write over the engine.  Not written yet: every call
 * is -FI_ENOSYS (and providers do not advertise FI_RMA), and RMA packets
 * that arrive are dropped. */
#include "rdm.h"

void lm_rdm_rma_recv(struct lm_rdm_ep *ep, struct lm_rdm_peer *peer,
                     const struct lm_rdm_hdr *h, const void *payload, size_t plen)
{
	(void)ep, (void)peer, (void)h, (void)payload, (void)plen;
}

static ssize_t no_read(struct fid_ep *ep, void *buf, size_t len, void *desc,
                       fi_addr_t src, uint64_t addr, uint64_t key, void *context)
{
	(void)ep, (void)buf, (void)len, (void)desc, (void)src, (void)addr, (void)key,
	    (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_readv(struct fid_ep *ep, const struct iovec *iov, void **desc,
                        size_t count, fi_addr_t src, uint64_t addr, uint64_t key,
                        void *context)
{
	(void)ep, (void)iov, (void)desc, (void)count, (void)src, (void)addr, (void)key,
	    (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_readmsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags)
{
	(void)ep, (void)msg, (void)flags;
	return -FI_ENOSYS;
}

static ssize_t no_write(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                        fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{
	(void)ep, (void)buf, (void)len, (void)desc, (void)dest, (void)addr, (void)key,
	    (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_writemsg(struct fid_ep *ep, const struct fi_msg_rma *msg,
                           uint64_t flags)
{
	(void)ep, (void)msg, (void)flags;
	return -FI_ENOSYS;
}

static ssize_t no_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest,
                         uint64_t addr, uint64_t key)
{
	(void)ep, (void)buf, (void)len, (void)dest, (void)addr, (void)key;
	return -FI_ENOSYS;
}

static ssize_t no_writedata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                            uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key,
                            void *context)
{
	(void)ep, (void)buf, (void)len, (void)desc, (void)data, (void)dest, (void)addr,
	    (void)key, (void)context;
	return -FI_ENOSYS;
}

static ssize_t no_injectdata(struct fid_ep *ep, const void *buf, size_t len,
                             uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key)
{
	(void)ep, (void)buf, (void)len, (void)data, (void)dest, (void)addr, (void)key;
	return -FI_ENOSYS;
}

const struct fi_ops_rma lm_rdm_rma_ops = {
    .size = sizeof(struct fi_ops_rma),
    .read = no_read,
    .readv = no_readv,
    .readmsg = no_readmsg,
    .write = no_write,
    .writev = no_readv, /* same signature, same answer */
    .writemsg = no_writemsg,
    .inject = no_inject,
    .writedata = no_writedata,
    .injectdata = no_injectdata,
};
