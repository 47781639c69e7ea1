/* sock.c - tests of util's socket and descriptor helpers (sock.h): errno
 * values as FI_E* codes, the eventfd signal/drain pair, and TCP sockets
 * bound in a port range and listening. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"
#include "util.h"

/* ---- lm_neg_errno ----------------------------------------------------------- */

static void test_neg_errno(void)
{
	CHECK_INT(lm_neg_errno(EADDRINUSE), -FI_EADDRINUSE);
	CHECK_INT(lm_neg_errno(EADDRNOTAVAIL), -FI_EADDRNOTAVAIL);
	CHECK_INT(lm_neg_errno(ENOMEM), -FI_ENOMEM);
	CHECK_INT(lm_neg_errno(EMFILE), -FI_EMFILE);
	CHECK_INT(lm_neg_errno(ECONNREFUSED), -FI_ECONNREFUSED);
	CHECK_INT(lm_neg_errno(ECONNRESET), -FI_ECONNRESET);
	CHECK_INT(lm_neg_errno(EACCES), -FI_EACCES);
	CHECK_INT(lm_neg_errno(EAGAIN), -FI_EAGAIN);
	/* An errno libfabric has no name for survives too, and reads as the
	 * C library's text. */
	CHECK_INT(lm_neg_errno(ENFILE), -ENFILE);
	CHECK_STR(fi_strerror(-lm_neg_errno(ENFILE)), strerror(ENFILE));
	/* Not an errno value: no success, no libfabric-only code. */
	CHECK_INT(lm_neg_errno(0), -FI_EOTHER);
	CHECK_INT(lm_neg_errno(-EINVAL), -FI_EOTHER);
	CHECK_INT(lm_neg_errno(FI_ERRNO_OFFSET), -FI_EOTHER);
}

/* ---- lm_fd_signal / lm_fd_drain ---------------------------------------------- */

static bool readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static void test_signal_drain(void)
{
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	lm_fd_drain(fd); /* nothing pending: harmless */
	CHECK(!readable(fd));
	lm_fd_signal(fd);
	lm_fd_signal(fd);
	CHECK(readable(fd));
	lm_fd_drain(fd); /* one drain takes both */
	CHECK(!readable(fd));
	close(fd);
}

/* ---- lm_sock_bind / lm_sock_listen ------------------------------------------ */

static struct sockaddr_in loopback(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static int port_of_fd(int fd)
{
	struct sockaddr_storage a;
	socklen_t len = sizeof(a);

	if (getsockname(fd, (struct sockaddr *)&a, &len))
		return -1;
	if (a.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
	return ntohs(((struct sockaddr_in *)&a)->sin_port);
}

/* A listener on a port the kernel picks: the range's first port below. */
static void test_bind_range(void)
{
	struct sockaddr_in any = loopback(0), at;
	int held = -1, fd = -1, port, got;

	/* No range: any port, non-blocking, close-on-exec, listening. */
	CHECK_INT(lm_sock_bind((struct sockaddr *)&any, sizeof(any), 0, 0, &held), 0);
	if (held < 0)
		return;
	CHECK(fcntl(held, F_GETFL) & O_NONBLOCK);
	CHECK(fcntl(held, F_GETFD) & FD_CLOEXEC);
	CHECK_INT(lm_sock_listen(held), 0);
	port = port_of_fd(held);
	CHECK(port > 0);

	/* That port asked for by name, or as a range of one: in use. */
	at = loopback(port);
	fd = 12345;
	CHECK_INT(lm_sock_bind((struct sockaddr *)&at, sizeof(at), 0, 0, &fd),
	          -FI_EADDRINUSE);
	CHECK_INT(fd, 12345); /* output set only on success */
	CHECK_INT(lm_sock_bind((struct sockaddr *)&any, sizeof(any), port, port, &fd),
	          -FI_EADDRINUSE);

	/* A range starting there: the first free port after it. */
	fd = -1;
	CHECK_INT(
	    lm_sock_bind((struct sockaddr *)&any, sizeof(any), port, port + 64, &fd), 0);
	if (fd >= 0) {
		got = port_of_fd(fd);
		CHECK(got > port && got <= port + 64);
		CHECK_INT(lm_sock_listen(fd), 0);
		close(fd);
	}

	/* An explicit port is taken as it is, range or not. */
	fd = -1;
	CHECK_INT(lm_sock_bind((struct sockaddr *)&any, sizeof(any), 0, 0, &fd), 0);
	if (fd >= 0) {
		got = port_of_fd(fd);
		close(fd);
		at = loopback(got);
		fd = -1;
		CHECK_INT(
		    lm_sock_bind((struct sockaddr *)&at, sizeof(at), port, port, &fd), 0);
		CHECK_INT(port_of_fd(fd), got);
		if (fd >= 0)
			close(fd);
	}
	close(held);
}

/* An address of no interface: its own error at once, not "every port of
 * the range is in use". */
static void test_bind_errors(void)
{
	struct sockaddr_in far = loopback(0);
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	int fd = -1;

	CHECK_INT(lm_sock_bind((struct sockaddr *)&un, sizeof(un), 0, 0, &fd),
	          -FI_EINVAL);
	inet_pton(AF_INET, "192.0.2.1", &far.sin_addr); /* TEST-NET-1 */
	if (!lm_sock_bind((struct sockaddr *)&far, sizeof(far), 0, 0, &fd)) {
		fprintf(stderr, "non-local binds allowed (ip_nonlocal_bind): skipped\n");
		close(fd);
		return;
	}
	CHECK_INT(lm_sock_bind((struct sockaddr *)&far, sizeof(far), 40000, 40100, &fd),
	          -FI_EADDRNOTAVAIL);
	CHECK_INT(fd, -1);
}

/* IPv6: the same range rule; the socket takes IPv6 only. */
static void test_bind_ipv6(void)
{
	struct sockaddr_in6 a = {.sin6_family = AF_INET6,
	                         .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	int held = -1, fd = -1, port, v6only = 0;
	socklen_t len = sizeof(v6only);

	if (lm_sock_bind((struct sockaddr *)&a, sizeof(a), 0, 0, &held)) {
		fprintf(stderr, "no IPv6 loopback: IPv6 checks skipped\n");
		return;
	}
	CHECK_INT(lm_sock_listen(held), 0);
	CHECK_INT(getsockopt(held, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &len), 0);
	CHECK_INT(v6only, 1);
	port = port_of_fd(held);
	CHECK_INT(lm_sock_bind((struct sockaddr *)&a, sizeof(a), port, port + 64, &fd),
	          0);
	if (fd >= 0) {
		CHECK(port_of_fd(fd) > port && port_of_fd(fd) <= port + 64);
		close(fd);
	}
	close(held);
}

int main(void)
{
	test_neg_errno();
	test_signal_drain();
	test_bind_range();
	test_bind_errors();
	test_bind_ipv6();
	return check_done();
}
