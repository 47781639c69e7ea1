/* pair.h - the frame of a two-process test over eptest: rank 0 and rank 1
 * each run their side on one endpoint, and a side that is done says so to
 * the other.  Header-only, like check.h, so its checks count in the test
 * program that includes it. */
#ifndef LOOM_TEST_PAIR_H
#define LOOM_TEST_PAIR_H

#include "check.h"
#include "eptest.h"

/* Tell the peer at `to` this side is done: one word with tag, then
 * progress a while so it leaves before this process moves on (the peer
 * waits for it). */
static inline void et_say_done(struct et_ep *e, fi_addr_t to, uint64_t tag)
{
	uint64_t word = 1;

	while (fi_tinject(e->ep, &word, sizeof(word), to, tag) == -FI_EAGAIN)
		et_progress(e);
	for (int i = 0; i < 1000; i++)
		et_progress(e);
}

/* One process of the pair: open e with o, run side[rank], meet the other
 * process, close; the process's exit status. */
static inline int et_pair(struct et_ep *e, const struct et_opts *o, int rank,
                          void (*const side[2])(void))
{
	if (et_open(e, o))
		return 2;
	side[rank ? 1 : 0]();
	et_barrier();
	CHECK_INT(et_close(e), 0);
	return check_done();
}

#endif
