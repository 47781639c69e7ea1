/* keeper.c - the acknowledgements a link leaves for the application's
 * next call, and the one thread per process that sends them when that
 * call does not come.
 *
 * A link acknowledges at the end of the poll that took a peer's packets.
 * When the poll handed packets to the engine, the application usually
 * answers at once (a ping-pong's reply), and the answer carries the
 * acknowledgement: a datagram and the peer's receive of it saved, a
 * third of a small message's latency.  So such a poll holds its
 * acknowledgements, ready to send (udp_kept), and the next call sends
 * them or finds them carried.  An application that reads its messages
 * and then waits by other means must still have answered its senders:
 * the keeper thread sends what stayed held past UDP_KEEP_US.  Only small
 * packets' acknowledgements are held (link.c, UDP_HOLD_BYTES).
 *
 * The thread wakes every UDP_KEEP_LOOK_US while links hold acknowledgements
 * now and then, and sleeps in the kernel once none did for
 * UDP_KEEP_IDLE_MS; the hold that finds it asleep wakes it.  It ends with
 * the last link (joined before the close returns): a process that closed
 * its endpoints has no thread of ours left, and a library unloaded after
 * (Open MPI's finalize) runs none of its code.  A link and
 * the thread share a hold through its state alone: the link writes the
 * datagrams while the state is NONE, the thread reads them while SENDING,
 * and each moves the state by compare-and-swap. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "udp.h"

/* How long a held acknowledgement waits for the application's next call:
 * long against a reply's turnaround. */
#define UDP_KEEP_US 2000
/* How often the thread looks while links hold: a held acknowledgement
 * goes out within UDP_KEEP_US + this, below the shortest retransmission
 * timeout (10 ms).  Each look preempts a busy-polling process on a shared
 * core: looking every 250 us cost a 64 B ping-pong 0.6 us a message, every
 * 2 ms a 1 MiB ping-pong 1.02-1.05x its time. */
#define UDP_KEEP_LOOK_US 6000
/* Without holds for this long the thread sleeps until the next one. */
#define UDP_KEEP_IDLE_MS 20

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct lm_list links; /* struct udp_kept, joined */
	pthread_t thread;
	uint64_t gen; /* bumped to end the running thread */
	bool running, failed;
	atomic_bool sleeping;
	_Atomic uint64_t holds; /* bumped by every hold: the thread's sign of use */
} keeper = {.lock = PTHREAD_MUTEX_INITIALIZER,
            .wake = PTHREAD_COND_INITIALIZER,
            .links = {&keeper.links, &keeper.links}};

/* Send k's datagrams if they are held and due. */
static void kept_fire(struct udp_kept *k, uint64_t now)
{
	int held = UDP_KEPT_HELD;

	if (atomic_load_explicit(&k->state, memory_order_acquire) != UDP_KEPT_HELD ||
	    now < k->due_us ||
	    !atomic_compare_exchange_strong(&k->state, &held, UDP_KEPT_SENDING))
		return;
	for (unsigned i = 0; i < k->n; i++) {
		/* Summed here: most holds are released unsent. */
		udp_wire_seal_buf(&k->ack[i].w, sizeof(k->ack[i].w));
		sendto(k->sock, &k->ack[i].w, sizeof(k->ack[i].w), MSG_DONTWAIT | MSG_NOSIGNAL,
		       &k->ack[i].to.sa, lm_inet_len(k->ack[i].to.sa.sa_family));
	}
	k->fired++;
	atomic_store_explicit(&k->state, UDP_KEPT_NONE, memory_order_release);
}

static void *keeper_run(void *arg)
{
	uint64_t seen = 0, last_ms = lm_now_ms(), gen = (uint64_t)(uintptr_t)arg;

	pthread_mutex_lock(&keeper.lock);
	while (keeper.gen == gen) {
		uint64_t holds = atomic_load(&keeper.holds), now_ms = lm_now_ms();
		struct timespec ts;
		struct lm_list *it;

		if (holds != seen) {
			seen = holds;
			last_ms = now_ms;
		}
		if (lm_list_empty(&keeper.links) || now_ms - last_ms > UDP_KEEP_IDLE_MS) {
			atomic_store(&keeper.sleeping, true);
			/* A hold after this store finds it set and wakes us. */
			if (atomic_load(&keeper.holds) == seen && keeper.gen == gen)
				pthread_cond_wait(&keeper.wake, &keeper.lock);
			atomic_store(&keeper.sleeping, false);
			last_ms = lm_now_ms();
			continue;
		}
		lm_list_foreach(&keeper.links, it)
		{
			kept_fire(lm_container_of(it, struct udp_kept, node), lm_now_us());
		}
		pthread_mutex_unlock(&keeper.lock);
		ts = (struct timespec){.tv_nsec = UDP_KEEP_LOOK_US * 1000};
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&keeper.lock);
	}
	pthread_mutex_unlock(&keeper.lock);
	return NULL;
}

/* A forked child has no keeper thread: it starts its own if it holds. */
static void keeper_atfork_child(void)
{
	pthread_mutex_init(&keeper.lock, NULL);
	pthread_cond_init(&keeper.wake, NULL);
	lm_list_init(&keeper.links);
	keeper.running = keeper.failed = false;
	atomic_store(&keeper.sleeping, false);
}

/* Under keeper.lock: the thread, started once.  False when it cannot be
 * (the link then acknowledges at once, as without it). */
static bool keeper_start(void)
{
	static bool atfork;

	if (keeper.running || keeper.failed)
		return keeper.running;
	if (!atfork && pthread_atfork(NULL, NULL, keeper_atfork_child)) {
		keeper.failed = true;
		return false;
	}
	atfork = true;
	if (pthread_create(&keeper.thread, NULL, keeper_run, (void *)(uintptr_t)keeper.gen)) {
		keeper.failed = true;
		return false;
	}
	keeper.running = true;
	return true;
}

bool udp_kept_hold(struct udp_kept *k, uint64_t now)
{
	if (!k->joined) {
		pthread_mutex_lock(&keeper.lock);
		if (keeper_start()) {
			lm_list_push_back(&keeper.links, &k->node);
			k->joined = true;
		}
		pthread_mutex_unlock(&keeper.lock);
		if (!k->joined)
			return false;
	}
	k->due_us = now + UDP_KEEP_US;
	atomic_store_explicit(&k->state, UDP_KEPT_HELD, memory_order_release);
	atomic_fetch_add(&keeper.holds, 1);
	if (atomic_load(&keeper.sleeping)) {
		pthread_mutex_lock(&keeper.lock);
		pthread_cond_signal(&keeper.wake);
		pthread_mutex_unlock(&keeper.lock);
	}
	return true;
}

bool udp_kept_release(struct udp_kept *k)
{
	int held = UDP_KEPT_HELD;

	if (atomic_compare_exchange_strong(&k->state, &held, UDP_KEPT_NONE))
		return true;
	/* The keeper took them: wait until they are out. */
	while (atomic_load_explicit(&k->state, memory_order_acquire) != UDP_KEPT_NONE)
		;
	return false;
}

void udp_kept_leave(struct udp_kept *k)
{
	bool last = false;
	pthread_t t = pthread_self(); /* set below when last */

	udp_kept_release(k);
	if (!k->joined)
		return;
	pthread_mutex_lock(&keeper.lock);
	lm_list_remove(&k->node);
	k->joined = false;
	if (lm_list_empty(&keeper.links) && keeper.running) {
		/* A hold of another link meanwhile starts a thread afresh;
		 * this one sees its generation gone and returns. */
		keeper.gen++;
		keeper.running = false;
		t = keeper.thread;
		last = true;
		pthread_cond_broadcast(&keeper.wake);
	}
	pthread_mutex_unlock(&keeper.lock);
	if (last)
		pthread_join(t, NULL);
}
