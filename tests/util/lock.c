/* lock.c - lm_lock: mutual exclusion under contention (more threads than
 * CPUs, so waiters spin, yield and nap), lm_lock_try, long holds, and an
 * off lock that never blocks, and fairness (a thread that takes the lock
 * back again and again keeps nobody out). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "check.h"
#include "util.h"

#define THREADS 4
#define ROUNDS  200000
#define FAIR_ROUNDS 200
#define FAIR_MAX_US 200000

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static struct lm_lock lock;
/* Updated non-atomically under the lock: a lost update means two holders. */
static volatile long counter;
static volatile int inside;
static int overlaps;

static void *hammer(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		lm_lock_acquire(&lock);
		if (inside++)
			overlaps++;
		counter = counter + 1;
		inside--;
		lm_lock_release(&lock);
	}
	return NULL;
}

static void *try_once(void *arg)
{
	*(bool *)arg = lm_lock_try(&lock);
	if (*(bool *)arg)
		lm_lock_release(&lock);
	return NULL;
}

static atomic_bool stop;
static volatile long polls;

/* A thread that takes the lock again and again, as progress polled in a
 * loop does, holding it a little each time. */
static void *poller(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		lm_lock_acquire(&lock);
		if (inside++)
			overlaps++;
		for (int i = 0; i < 2000; i++)
			polls = polls + 1;
		inside--;
		lm_lock_release(&lock);
	}
	return NULL;
}

static void *wait_for_it(void *arg)
{
	lm_lock_acquire(&lock);
	*(long *)arg = counter;
	lm_lock_release(&lock);
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS];
	bool got = true;
	long seen = 0;

	lm_lock_init(&lock, true);
	for (int i = 0; i < THREADS; i++)
		CHECK_INT(pthread_create(&t[i], NULL, hammer, NULL), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	CHECK_INT(counter, (long)THREADS * ROUNDS);
	CHECK_INT(overlaps, 0);

	/* Held: another thread's try fails, and succeeds once released. */
	lm_lock_acquire(&lock);
	pthread_create(&t[0], NULL, try_once, &got);
	pthread_join(t[0], NULL);
	CHECK(!got);
	lm_lock_release(&lock);
	pthread_create(&t[0], NULL, try_once, &got);
	pthread_join(t[0], NULL);
	CHECK(got);

	/* A long hold (past the spinning and yielding): the waiter naps and
	 * still gets the lock, after the holder's update. */
	lm_lock_acquire(&lock);
	pthread_create(&t[0], NULL, wait_for_it, &seen);
	nanosleep(&(struct timespec){.tv_nsec = 50 * 1000 * 1000}, NULL);
	counter = -1;
	lm_lock_release(&lock);
	pthread_join(t[0], NULL);
	CHECK_INT(seen, -1);
	lm_lock_fini(&lock);

	/* Fairness: threads that take the lock back at once, one per CPU,
	 * do not keep another out, and the three never overlap.  Each of
	 * FAIR_ROUNDS acquisitions here waits at most FAIR_MAX_US (without
	 * the hand-over to a waiter that asks, the longest wait was 2 s). */
	lm_lock_init(&lock, true);
	{
		uint64_t worst = 0;

		for (int i = 0; i < 2; i++)
			CHECK_INT(pthread_create(&t[i], NULL, poller, NULL), 0);
		for (int r = 0; r < FAIR_ROUNDS; r++) {
			uint64_t t0 = now_us(), w;

			lm_lock_acquire(&lock);
			w = now_us() - t0;
			if (inside++)
				overlaps++;
			inside--;
			lm_lock_release(&lock);
			if (w > worst)
				worst = w;
			nanosleep(&(struct timespec){.tv_nsec = 100 * 1000}, NULL);
		}
		atomic_store(&stop, true);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		fprintf(stderr, "fairness: longest wait %.3f ms over %d rounds\n",
		        worst / 1000.0, FAIR_ROUNDS);
		CHECK(worst < FAIR_MAX_US);
		CHECK_INT(overlaps, 0);
	}
	lm_lock_fini(&lock);

	/* Off (FI_THREAD_DOMAIN objects): acquiring twice does not block. */
	lm_lock_init(&lock, false);
	lm_lock_acquire(&lock);
	lm_lock_acquire(&lock);
	CHECK(lm_lock_try(&lock));
	lm_lock_release(&lock);
	lm_lock_fini(&lock);
	return check_done();
}
