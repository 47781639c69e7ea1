/* fi_errno.h - loom's error codes: the FI_E* names returned (negated) by every
 * libfabric call, and fi_strerror() to turn one into text. */
#ifndef LOOM_RDMA_FI_ERRNO_H
#define LOOM_RDMA_FI_ERRNO_H

#include <errno.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FI_SUCCESS 0

/*
 * Codes shared with the operating system are the host's errno values, so a
 * provider can hand back -errno from a failed syscall unchanged.  Only the
 * subset libfabric names is given an FI_ alias.
 */
#define FI_EPERM         EPERM
#define FI_ENOENT        ENOENT
#define FI_EINTR         EINTR
#define FI_EIO           EIO
#define FI_E2BIG         E2BIG
#define FI_EBADF         EBADF
#define FI_EAGAIN        EAGAIN
#define FI_ENOMEM        ENOMEM
#define FI_EACCES        EACCES
#define FI_EFAULT        EFAULT
#define FI_EBUSY         EBUSY
#define FI_ENODEV        ENODEV
#define FI_EINVAL        EINVAL
#define FI_EMFILE        EMFILE
#define FI_ENOSPC        ENOSPC
#define FI_ENOSYS        ENOSYS
#define FI_EWOULDBLOCK   EWOULDBLOCK
#define FI_ENOMSG        ENOMSG
#define FI_ENODATA       ENODATA
#define FI_EOVERFLOW     EOVERFLOW
#define FI_EMSGSIZE      EMSGSIZE
#define FI_ENOPROTOOPT   ENOPROTOOPT
#define FI_EOPNOTSUPP    EOPNOTSUPP
#define FI_EPROTO        EPROTO /* API 2.x */
#define FI_EADDRINUSE    EADDRINUSE
#define FI_EADDRNOTAVAIL EADDRNOTAVAIL
#define FI_ENETDOWN      ENETDOWN
#define FI_ENETUNREACH   ENETUNREACH
#define FI_ECONNABORTED  ECONNABORTED
#define FI_ECONNRESET    ECONNRESET
#define FI_ENOBUFS       ENOBUFS
#define FI_EISCONN       EISCONN
#define FI_ENOTCONN      ENOTCONN
#define FI_ESHUTDOWN     ESHUTDOWN
#define FI_ETIMEDOUT     ETIMEDOUT
#define FI_ECONNREFUSED  ECONNREFUSED
#define FI_EHOSTDOWN     EHOSTDOWN
#define FI_EHOSTUNREACH  EHOSTUNREACH
#define FI_EALREADY      EALREADY
#define FI_EINPROGRESS   EINPROGRESS
#define FI_EREMOTEIO     EREMOTEIO
#define FI_ECANCELED     ECANCELED
#define FI_EKEYREJECTED  EKEYREJECTED

/* Fabric-specific codes start above every errno a host defines. */
#define FI_ERRNO_OFFSET 256

enum {
	FI_EOTHER = FI_ERRNO_OFFSET, /* nothing more precise applies */
	FI_ETOOSMALL = 257,          /* caller's buffer cannot hold the result */
	FI_EOPBADSTATE = 258,        /* object not in a state allowing this call */
	FI_EAVAIL = 259,             /* an error entry waits to be read */
	FI_EBADFLAGS = 260,
	FI_ENOEQ = 261,
	FI_EDOMAIN = 262,
	FI_ENOCQ = 263,
	FI_ECRC = 264,
	FI_ETRUNC = 265, /* data longer than the receive buffer */
	FI_ENOKEY = 266,
	FI_ENOAV = 267,
	FI_EOVERRUN = 268, /* a queue dropped entries it had no room for */
	FI_ENORX = 269,    /* peer had no receive buffer posted */
	FI_ENOMR = 270,    /* no more memory registrations (2.x) */
	FI_EFIREWALLADDR = 271, /* the host is behind a firewall (2.x) */
	FI_ERRNO_MAX
};

/* Accepts the code with either sign; the string is static, never freed. */
const char *fi_strerror(int errnum);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_RDMA_FI_ERRNO_H */
