/* wait.c - wait objects and wait sets.  Each is an epoll instance holding
 * an eventfd (signals) and any descriptors progress hooks add, so one
 * sleep covers "another thread signalled" and "data arrived".  Blocking
 * calls sleep in the kernel with the caller's timeout; nothing spins.
 *
 * What FI_GETWAIT gives the application, by type: FI_WAIT_FD the epoll
 * descriptor; FI_WAIT_POLLFD the same descriptor as a one-entry pollfd
 * set; FI_WAIT_MUTEX_COND a mutex and condition variable, broadcast at
 * every signal (without taking the mutex: a signal may come from inside
 * fi_trywait, on the thread that holds it).  As with an fd, the
 * application calls fi_trywait before it sleeps. */
#include <poll.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util.h"

struct lm_wait_fd {
	struct lm_hnode node; /* keyed by fd */
	int users;
};

/* Descriptors a wait object's map holds before it grows: a few endpoints' hooks. */
#define WAIT_FDS_EXPECTED 8

void lm_wait_drain_stale(struct lm_wait *w)
{
	lm_fd_drain(w->efd);
}

int lm_wait_create(struct lm_fabric *fab, enum fi_wait_obj type, struct lm_wait **out)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct lm_wait *w;
	int ret;

	if (type == FI_WAIT_UNSPEC)
		type = FI_WAIT_FD;
	if (type != FI_WAIT_FD && type != FI_WAIT_YIELD && type != FI_WAIT_MUTEX_COND &&
	    type != FI_WAIT_POLLFD)
		return -FI_ENOSYS;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -FI_ENOMEM;
	w->fabric = fab;
	w->type = type;
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	w->epfd = w->efd < 0 ? -1 : epoll_create1(EPOLL_CLOEXEC);
	if (w->efd < 0 || w->epfd < 0) {
		ret = lm_neg_errno(errno);
		goto err;
	}
	ret = lm_hmap_init(&w->fds, WAIT_FDS_EXPECTED);
	if (ret)
		goto err;
	ev.data.fd = w->efd;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->efd, &ev)) {
		ret = lm_neg_errno(errno);
		goto err;
	}
	lm_list_init(&w->members);
	lm_lock_init(&w->lock, true);
	pthread_mutex_init(&w->mutex, NULL);
	pthread_cond_init(&w->cond, NULL);
	atomic_init(&w->ref, 1);
	if (fab)
		atomic_fetch_add(&fab->ref, 1);
	*out = w;
	return 0;
err:
	if (w->efd >= 0)
		close(w->efd);
	if (w->epfd >= 0)
		close(w->epfd);
	lm_hmap_fini(&w->fds);
	free(w);
	return ret;
}

void lm_wait_get(struct lm_wait *w)
{
	atomic_fetch_add(&w->ref, 1);
}

void lm_wait_put(struct lm_wait *w)
{
	if (!w || atomic_fetch_sub(&w->ref, 1) != 1)
		return;
	close(w->efd);
	close(w->epfd);
	for (size_t i = 0; i < w->fds.nbuckets; i++) {
		while (w->fds.buckets[i]) {
			struct lm_hnode *n = w->fds.buckets[i];

			lm_hmap_remove(&w->fds, n);
			free(lm_container_of(n, struct lm_wait_fd, node));
		}
	}
	lm_hmap_fini(&w->fds);
	lm_lock_fini(&w->lock);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->mutex);
	if (w->fabric)
		atomic_fetch_sub(&w->fabric->ref, 1);
	free(w);
}

void lm_wait_signal(struct lm_wait *w)
{
	lm_fd_signal(w->efd);
	if (w->type == FI_WAIT_MUTEX_COND)
		pthread_cond_broadcast(&w->cond);
}

int lm_wait_add_fd(struct lm_wait *w, int fd)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
	struct lm_hnode *n;
	struct lm_wait_fd *f;
	int ret = 0;

	if (fd < 0)
		return -FI_EINVAL;
	lm_lock_acquire(&w->lock);
	n = lm_hmap_find(&w->fds, (uint64_t)fd);
	if (n) {
		lm_container_of(n, struct lm_wait_fd, node)->users++;
		goto out;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		ret = -FI_ENOMEM;
		goto out;
	}
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		ret = lm_neg_errno(errno);
		free(f);
		goto out;
	}
	f->users = 1;
	lm_hmap_insert(&w->fds, &f->node, (uint64_t)fd);
out:
	lm_lock_release(&w->lock);
	return ret;
}

void lm_wait_del_fd(struct lm_wait *w, int fd)
{
	struct lm_hnode *n;
	struct lm_wait_fd *f;

	lm_lock_acquire(&w->lock);
	n = lm_hmap_find(&w->fds, (uint64_t)fd);
	if (n) {
		f = lm_container_of(n, struct lm_wait_fd, node);
		if (--f->users == 0) {
			lm_hmap_remove(&w->fds, n);
			free(f);
			epoll_ctl(w->epfd, EPOLL_CTL_DEL, fd, NULL);
		}
	}
	lm_lock_release(&w->lock);
}

void lm_wait_add_member(struct lm_wait *w, struct lm_wait_member *m)
{
	lm_lock_acquire(&w->lock);
	lm_list_push_back(&w->members, &m->node);
	lm_lock_release(&w->lock);
}

void lm_wait_del_member(struct lm_wait *w, struct lm_wait_member *m)
{
	lm_lock_acquire(&w->lock);
	lm_list_remove(&m->node);
	lm_lock_release(&w->lock);
}

int lm_wait_block(struct lm_wait *w, int timeout_ms)
{
	struct epoll_event ev[8];
	uint64_t start = lm_now_ms();
	int n, left = timeout_ms;

	if (w->type == FI_WAIT_YIELD) {
		for (;;) {
			n = epoll_wait(w->epfd, ev, 8, 0);
			if (n > 0)
				break;
			left = lm_timeout_left(timeout_ms, start);
			if (!left)
				return -FI_ETIMEDOUT;
			sched_yield();
		}
	} else {
		do {
			n = epoll_wait(w->epfd, ev, 8, left);
			if (n < 0 && errno == EINTR) {
				left = lm_timeout_left(timeout_ms, start);
				continue;
			}
			break;
		} while (left);
		if (n <= 0)
			return -FI_ETIMEDOUT;
	}
	lm_wait_drain_stale(w);
	return 0;
}

int lm_wait_control(struct lm_wait *w, int command, void *arg)
{
	if (!w && (command == FI_GETWAIT || command == FI_GETWAITOBJ)) {
		if (!arg)
			return -FI_EINVAL;
		if (command == FI_GETWAIT)
			return -FI_ENODATA;
		*(enum fi_wait_obj *)arg = FI_WAIT_NONE;
		return 0;
	}
	switch (command) {
	case FI_GETWAIT:
		if (!arg)
			return -FI_EINVAL;
		switch (w->type) {
		case FI_WAIT_FD:
			*(int *)arg = w->epfd;
			return 0;
		case FI_WAIT_MUTEX_COND: {
			struct fi_mutex_cond *mc = arg;

			mc->mutex = &w->mutex;
			mc->cond = &w->cond;
			return 0;
		}
		case FI_WAIT_POLLFD: {
			/* man fi_control: nfds in, the count out; too small
			 * is -FI_ETOOSMALL.  The set never changes. */
			struct fi_wait_pollfd *pf = arg;
			size_t room = pf->nfds;

			pf->change_index = 1;
			pf->nfds = 1;
			if (room < 1 || !pf->fd)
				return -FI_ETOOSMALL;
			pf->fd[0] = (struct pollfd){.fd = w->epfd, .events = POLLIN};
			return 0;
		}
		default:
			return -FI_ENODATA;
		}
	case FI_GETWAITOBJ:
		if (!arg)
			return -FI_EINVAL;
		*(enum fi_wait_obj *)arg = w->type;
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

/* ---- wait sets: fi_wait_open, fi_wait, fi_trywait ---------------------- */

static int waitset_close(struct fid *fid)
{
	struct lm_wait *w = lm_container_of(fid, struct lm_wait, wait_fid.fid);

	if (atomic_load(&w->ref) > 1)
		return -FI_EBUSY;
	lm_wait_put(w);
	return 0;
}

static int waitset_control(struct fid *fid, int command, void *arg)
{
	return lm_wait_control(lm_container_of(fid, struct lm_wait, wait_fid.fid), command,
			       arg);
}

static int waitset_wait(struct fid_wait *waitset, int timeout)
{
	struct lm_wait *w = lm_container_of(waitset, struct lm_wait, wait_fid);
	uint64_t start = lm_now_ms();
	struct lm_list *it;

	for (;;) {
		int ready = 0, left;

		/* Members progress their endpoints and report whether anything
		 * is waiting to be read. */
		lm_lock_acquire(&w->lock);
		lm_list_foreach(&w->members, it)
		{
			struct lm_wait_member *m = lm_list_entry(it, struct lm_wait_member, node);

			if (m->trywait(m->fid) == -FI_EAGAIN)
				ready = 1;
		}
		lm_lock_release(&w->lock);
		if (ready)
			return 0;
		left = lm_timeout_left(timeout, start);
		if (!left)
			return -FI_ETIMEDOUT;
		if (lm_wait_block(w, left))
			return -FI_ETIMEDOUT;
	}
}

static const struct fi_ops waitset_fid_ops = {
	.size = sizeof(struct fi_ops),
	.close = waitset_close,
	.bind = lm_fid_no_bind,
	.control = waitset_control,
	.ops_open = lm_fid_no_ops_open,
};

static const struct fi_ops_wait waitset_ops = {
	.size = sizeof(struct fi_ops_wait),
	.wait = waitset_wait,
};

int lm_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr,
		 struct fid_wait **waitset)
{
	struct lm_fabric *fab;
	struct lm_wait *w;
	int ret;

	if (!fabric || !attr || !waitset)
		return -FI_EINVAL;
	if (attr->flags)
		return -FI_EBADFLAGS;
	fab = lm_container_of(fabric, struct lm_fabric, fabric_fid);
	ret = lm_wait_create(fab, attr->wait_obj, &w);
	if (ret)
		return ret;
	w->wait_fid.fid.fclass = FI_CLASS_WAIT;
	w->wait_fid.fid.ops = (struct fi_ops *)&waitset_fid_ops;
	w->wait_fid.ops = (struct fi_ops_wait *)&waitset_ops;
	*waitset = &w->wait_fid;
	return 0;
}

/* fi_trywait: each fid must be a CQ, counter, EQ or wait set; the object
 * says (through fi_control(FI_GETWAIT)-capable ops) whether it is safe to
 * sleep.  Objects implement the check as their own member hook. */
int lm_trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
	(void)fabric;
	if (!fids || count < 0)
		return -FI_EINVAL;
	for (int i = 0; i < count; i++) {
		int ret = lm_fid_trywait(fids[i]);

		if (ret)
			return ret;
	}
	return 0;
}
