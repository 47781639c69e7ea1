/* lock.c - lm_lock: mutual exclusion under contention (more threads than
 * CPUs, so waiters spin, yield and nap), lm_lock_try, long holds, and an
 * off lock that never blocks. */
#include <pthread.h>
#include <time.h>

#include "check.h"
#include "util.h"

#define THREADS 4
#define ROUNDS  200000

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

	/* Off (FI_THREAD_DOMAIN objects): acquiring twice does not block. */
	lm_lock_init(&lock, false);
	lm_lock_acquire(&lock);
	lm_lock_acquire(&lock);
	CHECK(lm_lock_try(&lock));
	lm_lock_release(&lock);
	lm_lock_fini(&lock);
	return check_done();
}
