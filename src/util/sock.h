/* sock.h - system calls' errors as FI_E* codes, the eventfd/timerfd
 * signal-and-drain pair, and listening TCP sockets and UDP sockets bound in a port range:
 * what the providers' links and connection management share. */
#ifndef LOOM_UTIL_SOCK_H
#define LOOM_UTIL_SOCK_H

#include <sys/socket.h>

#include <rdma/fi_errno.h>

/* Connections a listening socket queues before they are accepted: a
 * burst of peers connecting at once (an all-to-all start) waits there
 * rather than being refused.  The kernel caps it at net.core.somaxconn. */
#define LM_LISTEN_BACKLOG 512

/* An errno value as the negative FI_E* code a call returns.  libfabric's
 * codes below FI_ERRNO_OFFSET are the errno values themselves (FI_ENOMEM
 * is ENOMEM, FI_EADDRINUSE is EADDRINUSE...) and fi_strerror names every
 * errno, so the specific error survives; anything else (0, a negative or
 * out-of-range value) is -FI_EOTHER. */
static inline int lm_neg_errno(int err)
{
	return err > 0 && err < FI_ERRNO_OFFSET ? -err : -FI_EOTHER;
}

/* Make an eventfd readable (add 1 to its counter).  It cannot fail but
 * for a saturated counter, which is readable already. */
void lm_fd_signal(int fd);
/* Clear an eventfd (not EFD_SEMAPHORE) or a timerfd's expirations: one
 * read takes the whole count; nothing pending is not an error. */
void lm_fd_drain(int fd);

/* A new non-blocking, close-on-exec TCP socket of addr's family (AF_INET
 * or AF_INET6) bound to addr, into *fd.  SO_REUSEADDR is set (a restarted
 * process takes its port back) and an IPv6 socket takes IPv6 only.  When
 * addr's port is 0 and port_low is not, the port is the first free one
 * of [port_low, port_high] (-FI_EADDRINUSE when none is); otherwise any
 * (0) or addr's.  0, or a negative FI_E* code. */
int lm_sock_bind(const struct sockaddr *addr, socklen_t len, int port_low, int port_high,
                 int *fd);
/* As lm_sock_bind, for a socket of type (SOCK_STREAM or SOCK_DGRAM); a
 * datagram socket gets no SO_REUSEADDR, which would let two share a port. */
int lm_sock_bind_type(int type, const struct sockaddr *addr, socklen_t len, int port_low,
                      int port_high, int *fd);
/* listen() with LM_LISTEN_BACKLOG: 0, or a negative FI_E* code. */
int lm_sock_listen(int fd);

#endif
