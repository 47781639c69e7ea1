/* sock.c - the eventfd/timerfd signal-and-drain pair and listening TCP
 * sockets bound in a port range (sock.h). */
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "sock.h"

void lm_fd_signal(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) < 0) {
		/* the counter is saturated: readable already */
	}
}

void lm_fd_drain(int fd)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) < 0) {
		/* nothing pending */
	}
}

/* Where the port is in a sockaddr_in or sockaddr_in6; NULL for other
 * families. */
static in_port_t *port_of(struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return &((struct sockaddr_in *)a)->sin_port;
	if (a->ss_family == AF_INET6)
		return &((struct sockaddr_in6 *)a)->sin6_port;
	return NULL;
}

/* The first port of [low, high] that binds: 0, or -FI_EADDRINUSE when
 * every one is taken.  A port may be in use or privileged (EACCES); any
 * other error is the address's, which no other port cures. */
static int bind_range(int fd, struct sockaddr_storage *a, socklen_t len, int low,
                      int high)
{
	in_port_t *port = port_of(a);

	for (int p = low; p <= high && p <= UINT16_MAX; p++) {
		*port = htons((uint16_t)p);
		if (!bind(fd, (struct sockaddr *)a, len))
			return 0;
		if (errno != EADDRINUSE && errno != EACCES)
			return lm_neg_errno(errno);
	}
	return -FI_EADDRINUSE;
}

int lm_sock_bind(const struct sockaddr *addr, socklen_t len, int port_low, int port_high,
                 int *fd)
{
	return lm_sock_bind_type(SOCK_STREAM, addr, len, port_low, port_high, fd);
}

int lm_sock_bind_type(int type, const struct sockaddr *addr, socklen_t len, int port_low,
                      int port_high, int *fd)
{
	struct sockaddr_storage a;
	int one = 1, s, ret = 0;

	if (len > sizeof(a))
		return -FI_EINVAL;
	memset(&a, 0, sizeof(a));
	memcpy(&a, addr, len);
	if (!port_of(&a))
		return -FI_EINVAL;
	s = socket(a.ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		return lm_neg_errno(errno);
	/* A datagram socket with it would share its port with another. */
	if (type == SOCK_STREAM)
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* IPv4 peers are another socket's (an IPv4 endpoint's). */
	if (a.ss_family == AF_INET6)
		setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (*port_of(&a) || port_low <= 0)
		ret = bind(s, (struct sockaddr *)&a, len) ? lm_neg_errno(errno) : 0;
	else
		ret = bind_range(s, &a, len, port_low, port_high);
	if (ret) {
		close(s);
		return ret;
	}
	*fd = s;
	return 0;
}

int lm_sock_listen(int fd)
{
	return listen(fd, LM_LISTEN_BACKLOG) ? lm_neg_errno(errno) : 0;
}
