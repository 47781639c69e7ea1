/* loop_link.c - the loopback link: packets queued between endpoints of one
 * process.  It lets the engine run, and be tested, without any transport;
 * small limits (packet size, queue depth) push every protocol path.  Built
 * into the test programs that use it, never into the library. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "loop_link.h"

#define LOOP_MAX_PAYLOAD 1024
#define LOOP_QUEUE_MAX   64

struct loop_pkt {
	struct lm_list node;
	uint64_t src;
	size_t len;
	unsigned char hdr[64];
	unsigned char payload[];
};

struct loop_link {
	struct lm_link link;
	uint64_t id;
	size_t hdr_size;
	lm_link_recv_fn recv;
	void *arg;
	pthread_mutex_t qlock;
	struct lm_list queue;
	size_t qlen;
	_Atomic bool armed;
	struct lm_list node; /* in the registry */
};

struct lm_link_peer {
	uint64_t id;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lm_list registry = LM_LIST_INIT(registry);
static uint64_t next_id = 1;
static _Atomic bool loop_bulk_off;

void loop_link_set_bulk(bool on)
{
	atomic_store(&loop_bulk_off, !on);
}

/* Caller holds reg_lock. */
static struct loop_link *find(uint64_t id)
{
	struct lm_list *it;

	lm_list_foreach(&registry, it)
	{
		struct loop_link *l = lm_container_of(it, struct loop_link, node);

		if (l->id == id)
			return l;
	}
	return NULL;
}

static int loop_from_str(const char *node, const char *service, void *addr)
{
	unsigned long long id;
	char tail;

	(void)service;
	if (!node || sscanf(node, "loop://%llu%c", &id, &tail) != 1 || !id)
		return -FI_EINVAL;
	memcpy(addr, &(uint64_t){id}, sizeof(uint64_t));
	return 0;
}

static int loop_to_str(const void *addr, char *buf, size_t *len)
{
	uint64_t id;
	char tmp[32];
	size_t need;

	memcpy(&id, addr, sizeof(id));
	need =
	    (size_t)snprintf(tmp, sizeof(tmp), "loop://%llu", (unsigned long long)id) + 1;
	if (*len)
		snprintf(buf, *len, "%s", tmp);
	*len = need;
	return 0;
}

static int loop_open(void *ctx, const struct lm_link_attr *attr, const void *name,
                     struct lm_link **out)
{
	struct loop_link *l;

	(void)ctx;
	if (attr->hdr_size > sizeof(((struct loop_pkt *)0)->hdr))
		return -FI_EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -FI_ENOMEM;
	l->link.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (l->link.fd < 0) {
		int ret = lm_neg_errno(errno);

		free(l);
		return ret;
	}
	pthread_mutex_init(&l->qlock, NULL);
	lm_list_init(&l->queue);
	l->hdr_size = attr->hdr_size;
	l->recv = attr->recv;
	l->arg = attr->arg;
	l->link.ops = &loop_link_ops;
	l->link.max_payload = LOOP_MAX_PAYLOAD;
	l->link.inline_max = 128;
	l->link.caps = attr->no_bulk || atomic_load(&loop_bulk_off)
	                   ? 0
	                   : LM_LINK_BULK_READ | LM_LINK_BULK_WRITE;
	l->link.addr = &l->id;
	pthread_mutex_lock(&reg_lock);
	if (name) {
		memcpy(&l->id, name, sizeof(l->id));
		if (!l->id || find(l->id)) {
			pthread_mutex_unlock(&reg_lock);
			close(l->link.fd);
			pthread_mutex_destroy(&l->qlock);
			free(l);
			return -FI_EADDRINUSE;
		}
	} else {
		while (find(next_id))
			next_id++;
		l->id = next_id++;
	}
	lm_list_push_back(&registry, &l->node);
	pthread_mutex_unlock(&reg_lock);
	*out = &l->link;
	return 0;
}

static void loop_close(struct lm_link *link)
{
	struct loop_link *l = lm_container_of(link, struct loop_link, link);
	struct lm_list *n;

	pthread_mutex_lock(&reg_lock);
	lm_list_remove(&l->node);
	pthread_mutex_unlock(&reg_lock);
	while ((n = lm_list_pop_front(&l->queue)))
		free(lm_container_of(n, struct loop_pkt, node));
	close(link->fd);
	pthread_mutex_destroy(&l->qlock);
	free(l);
}

static int loop_peer_open(struct lm_link *link, const void *addr,
                          struct lm_link_peer **peer)
{
	struct lm_link_peer *p = malloc(sizeof(*p));

	(void)link;
	if (!p)
		return -FI_ENOMEM;
	memcpy(&p->id, addr, sizeof(p->id));
	*peer = p;
	return 0;
}

static void loop_peer_close(struct lm_link *link, struct lm_link_peer *peer)
{
	(void)link;
	free(peer);
}

static ssize_t loop_send(struct lm_link *link, struct lm_link_peer *peer, const void *hdr,
                         const struct iovec *iov, size_t iov_count)
{
	struct loop_link *src = lm_container_of(link, struct loop_link, link);
	struct loop_link *dst;
	struct loop_pkt *pkt;
	size_t len = 0, off = 0;
	ssize_t ret = 0;

	for (size_t i = 0; i < iov_count; i++)
		len += iov[i].iov_len;
	if (len > LOOP_MAX_PAYLOAD)
		return -FI_EMSGSIZE;
	pthread_mutex_lock(&reg_lock);
	dst = find(peer->id);
	if (!dst) {
		ret = -FI_EIO;
		goto out;
	}
	pthread_mutex_lock(&dst->qlock);
	if (dst->qlen >= LOOP_QUEUE_MAX) {
		pthread_mutex_unlock(&dst->qlock);
		ret = -FI_EAGAIN;
		goto out;
	}
	pkt = malloc(sizeof(*pkt) + len);
	if (!pkt) {
		pthread_mutex_unlock(&dst->qlock);
		ret = -FI_EAGAIN;
		goto out;
	}
	pkt->src = src->id;
	pkt->len = len;
	memcpy(pkt->hdr, hdr, src->hdr_size);
	for (size_t i = 0; i < iov_count; i++) {
		if (iov[i].iov_len) /* its base may be NULL */
			memcpy(pkt->payload + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	lm_list_push_back(&dst->queue, &pkt->node);
	dst->qlen++;
	pthread_mutex_unlock(&dst->qlock);
	if (atomic_load(&dst->armed))
		lm_fd_signal(dst->link.fd);
out:
	pthread_mutex_unlock(&reg_lock);
	return ret;
}

static int loop_poll(struct lm_link *link, int budget)
{
	struct loop_link *l = lm_container_of(link, struct loop_link, link);
	int n = 0;

	while (n < budget) {
		struct lm_list *node;
		struct loop_pkt *pkt;

		pthread_mutex_lock(&l->qlock);
		node = lm_list_pop_front(&l->queue);
		if (node)
			l->qlen--;
		pthread_mutex_unlock(&l->qlock);
		if (!node)
			break;
		pkt = lm_container_of(node, struct loop_pkt, node);
		l->recv(l->arg, &pkt->src, pkt->hdr, pkt->payload, pkt->len);
		free(pkt);
		n++;
	}
	return n;
}

static void loop_arm(struct lm_link *link)
{
	struct loop_link *l = lm_container_of(link, struct loop_link, link);

	lm_fd_drain(link->fd);
	atomic_store(&l->armed, true);
}

static void loop_disarm(struct lm_link *link)
{
	struct loop_link *l = lm_container_of(link, struct loop_link, link);

	atomic_store(&l->armed, false);
	lm_fd_drain(link->fd);
}

/* Same process: the "peer's memory" is ours, so this is memcpy.  Ranges
 * are the sender's posted buffers, as with process_vm_readv/writev. */
static ssize_t loop_bulk_copy(struct lm_link *link, struct lm_link_peer *peer,
                              const struct iovec *local, size_t local_count,
                              const struct iovec *remote, size_t remote_count, bool write)
{
	size_t li = 0, loff = 0, done = 0;
	bool alive;

	if (!(link->caps & LM_LINK_BULK_READ) || atomic_load(&loop_bulk_off))
		return -FI_ENOSYS;
	pthread_mutex_lock(&reg_lock);
	alive = find(peer->id) != NULL;
	pthread_mutex_unlock(&reg_lock);
	if (!alive)
		return -FI_EIO;
	for (size_t ri = 0; ri < remote_count; ri++) {
		size_t roff = 0;

		while (roff < remote[ri].iov_len && li < local_count) {
			size_t n =
			    LM_MIN(remote[ri].iov_len - roff, local[li].iov_len - loff);

			if (write)
				memcpy((char *)remote[ri].iov_base + roff,
				       (char *)local[li].iov_base + loff, n);
			else
				memcpy((char *)local[li].iov_base + loff,
				       (char *)remote[ri].iov_base + roff, n);
			roff += n;
			loff += n;
			done += n;
			if (loff == local[li].iov_len) {
				li++;
				loff = 0;
			}
		}
	}
	return (ssize_t)done;
}

static ssize_t loop_bulk_read(struct lm_link *link, struct lm_link_peer *peer,
                              const struct iovec *local, size_t local_count,
                              const struct iovec *remote, size_t remote_count)
{
	return loop_bulk_copy(link, peer, local, local_count, remote, remote_count,
	                      false);
}

static ssize_t loop_bulk_write(struct lm_link *link, struct lm_link_peer *peer,
                               const struct iovec *local, size_t local_count,
                               const struct iovec *remote, size_t remote_count)
{
	return loop_bulk_copy(link, peer, local, local_count, remote, remote_count, true);
}

static bool loop_peer_alive(struct lm_link *link, struct lm_link_peer *peer)
{
	bool alive;

	(void)link;
	pthread_mutex_lock(&reg_lock);
	alive = find(peer->id) != NULL;
	pthread_mutex_unlock(&reg_lock);
	return alive;
}

const struct lm_link_ops loop_link_ops = {
    .name = "loop",
    .addrlen = sizeof(uint64_t),
    .addr_from_str = loop_from_str,
    .addr_str_max = sizeof("loop://18446744073709551615"),
    .addr_to_str = loop_to_str,
    .open = loop_open,
    .close = loop_close,
    .peer_open = loop_peer_open,
    .peer_close = loop_peer_close,
    .send = loop_send,
    .poll = loop_poll,
    .arm = loop_arm,
    .disarm = loop_disarm,
    .bulk_read = loop_bulk_read,
    .bulk_write = loop_bulk_write,
    .peer_alive = loop_peer_alive,
};
