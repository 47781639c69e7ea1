/* auto.c - automatic data progress (FI_PROGRESS_AUTO, man fi_domain): one
 * thread per domain moves its endpoints' transfers (RDM, and tcp's
 * connected ones) while the application computes.  It progresses every
 * enabled endpoint as a sleeper would (its link armed, so senders ring
 * its doorbell, and a timer set while something waits on the peer),
 * then sleeps in the kernel on the links' descriptors: an idle domain
 * costs no CPU.  The thread starts with the domain's first enabled
 * endpoint and ends with its last.
 *
 * Lock order: life (add and del, one at a time), then mutex (held while
 * the thread progresses, and by add/del), then ep->lock; nothing holding
 * an endpoint's lock takes either. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rdm.h"

/* One pass of the thread over ep: what the link rang is drained
 * (disarm), the endpoint progressed and its link armed again. */
static void auto_pass(struct lm_rdm_ep *ep)
{
	lm_lock_acquire(ep->lock);
	if (ep->armed) {
		ep->link->ops->disarm(ep->link);
		ep->armed = false;
	}
	lm_lock_release(ep->lock);
	lm_rdm_progress(ep, true);
}

static void *auto_run(void *arg)
{
	struct lm_rdm_auto *a = arg;
	struct epoll_event ev[16];

	pthread_mutex_lock(&a->mutex);
	while (!a->stop) {
		struct lm_list *it;
		int n;

		lm_list_foreach(&a->eps, it)
		auto_pass(lm_container_of(it, struct lm_rdm_ep, auto_node));
		pthread_mutex_unlock(&a->mutex);
		n = epoll_wait(a->epfd, ev, (int)LM_ARRAY_SIZE(ev), -1);
		for (int i = 0; i < n; i++) {
			uint64_t v;

			if (ev[i].data.ptr == a && read(a->efd, &v, sizeof(v)) < 0)
				continue; /* another reader took it */
		}
		pthread_mutex_lock(&a->mutex);
	}
	pthread_mutex_unlock(&a->mutex);
	return NULL;
}

void lm_rdm_progress_param(struct fi_provider *prov)
{
	fi_param_define(prov, "data_progress", FI_PARAM_STRING,
	                "Data progress of the endpoints of a program whose hints "
	                "leave it to the provider: manual (progress runs in the "
	                "application's calls) or auto, a thread per domain "
	                "(default: manual)");
}

void lm_rdm_progress_default(struct fi_provider *prov, const struct fi_info *hints,
                             struct fi_info *list)
{
	char *v = NULL;

	if (hints && hints->domain_attr && hints->domain_attr->data_progress)
		return;
	if (fi_param_get_str(prov, "data_progress", &v) || !v || strcmp(v, "auto"))
		return;
	for (; list; list = list->next)
		if (list->ep_attr && (list->ep_attr->type == FI_EP_RDM ||
		                      list->ep_attr->type == FI_EP_MSG))
			list->domain_attr->data_progress = FI_PROGRESS_AUTO;
}

void lm_rdm_auto_init(struct lm_rdm_auto *a)
{
	memset(a, 0, sizeof(*a));
	pthread_mutex_init(&a->mutex, NULL);
	pthread_mutex_init(&a->life, NULL);
	lm_list_init(&a->eps);
	a->epfd = a->efd = -1;
}

/* Wake the thread out of its sleep (its list changed, or it is to stop). */
static void auto_kick(struct lm_rdm_auto *a)
{
	uint64_t one = 1;

	if (write(a->efd, &one, sizeof(one)) < 0) {
		/* The counter is full: the thread wakes anyway. */
	}
}

/* The thread and its descriptors, for the first endpoint (under mutex). */
static int auto_start(struct lm_rdm_auto *a)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = a};
	int ret;

	a->epfd = epoll_create1(EPOLL_CLOEXEC);
	a->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (a->epfd < 0 || a->efd < 0 || epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->efd, &ev)) {
		ret = lm_neg_errno(errno);
		goto err;
	}
	a->stop = false;
	ret = -pthread_create(&a->thread, NULL, auto_run, a);
	if (ret) {
		ret = lm_neg_errno(-ret);
		goto err;
	}
	a->running = true;
	return 0;
err:
	if (a->epfd >= 0)
		close(a->epfd);
	if (a->efd >= 0)
		close(a->efd);
	a->epfd = a->efd = -1;
	return ret;
}

int lm_rdm_auto_add(struct lm_rdm_ep *ep)
{
	struct lm_rdm_auto *a = &ep->dom->autop;
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ep};
	int ret = 0;

	if (!ep->dom->auto_progress || !ep->link || ep->auto_on)
		return 0;
	pthread_mutex_lock(&a->life);
	pthread_mutex_lock(&a->mutex);
	if (!a->running)
		ret = auto_start(a);
	if (!ret && ep->link->fd >= 0 && epoll_ctl(a->epfd, EPOLL_CTL_ADD, ep->link->fd, &ev))
		ret = lm_neg_errno(errno);
	if (!ret) {
		lm_list_push_back(&a->eps, &ep->auto_node);
		ep->auto_on = true;
		auto_kick(a);
	}
	pthread_mutex_unlock(&a->mutex);
	pthread_mutex_unlock(&a->life);
	return ret;
}

void lm_rdm_auto_del(struct lm_rdm_ep *ep)
{
	struct lm_rdm_auto *a = &ep->dom->autop;
	bool last;

	if (!ep->auto_on)
		return;
	pthread_mutex_lock(&a->life);
	pthread_mutex_lock(&a->mutex);
	lm_list_remove(&ep->auto_node);
	ep->auto_on = false;
	if (ep->link->fd >= 0)
		epoll_ctl(a->epfd, EPOLL_CTL_DEL, ep->link->fd, NULL);
	last = lm_list_empty(&a->eps);
	if (last) {
		a->stop = true;
		auto_kick(a);
	}
	pthread_mutex_unlock(&a->mutex);
	if (last) {
		pthread_join(a->thread, NULL);
		a->running = false;
		close(a->epfd);
		close(a->efd);
		a->epfd = a->efd = -1;
	}
	pthread_mutex_unlock(&a->life);
}
