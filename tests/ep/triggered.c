/* triggered.c - triggered operations (FI_TRIGGER, man fi_trigger) across
 * two processes.  Rank 1 sets up a chain and then only reads a counter:
 * the message rank 0 sends bumps its receive counter, which issues a
 * held send back to rank 0; that send's completion bumps its send
 * counter, which issues a held RMA write into rank 0's memory.  Rank 0
 * checks the reply and the written bytes.  Held operations keep their
 * endpoint and counter open (-FI_EBUSY), one whose threshold is already
 * reached is issued at once, and a counter of another domain or a
 * trigger of another kind is refused.  Deferred work (FI_QUEUE_WORK):
 * queued, released, cancelled and flushed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_rma.h>
#include <rdma/fi_trigger.h>

#include "check.h"
#include "eptest.h"

#define TMO 20000

struct ctx {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_cntr *scntr, *rcntr, *wcntr; /* send, receive, write */
	struct fid_ep *ep;
	struct fid_mr *mr;
};

static int open_ep(struct ctx *c, char *name, size_t len, void *mem, size_t memlen)
{
	struct fi_info *h = fi_allocinfo();
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .size = 64};
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	const char *node = getenv("LOOM_TEST_NODE");
	int ret;

	if (!h)
		return -FI_ENOMEM;
	h->fabric_attr->prov_name = strdup(et_prov());
	h->ep_attr->type = FI_EP_RDM;
	h->addr_format = FI_ADDR_STR;
	h->caps = FI_MSG | FI_RMA | FI_TRIGGER | FI_RMA_EVENT;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	ret = fi_getinfo(FI_VERSION(1, 17), node, NULL, node ? FI_SOURCE : 0, h, &c->info);
	fi_freeinfo(h);
	OKR(ret);
	CHECK(c->info->caps & FI_TRIGGER);
	OKR(fi_fabric(c->info->fabric_attr, &c->fabric, NULL));
	OKR(fi_domain(c->fabric, c->info, &c->domain, NULL));
	OKR(fi_cq_open(c->domain, &cqa, &c->cq, NULL));
	OKR(fi_cntr_open(c->domain, &ca, &c->scntr, NULL));
	OKR(fi_cntr_open(c->domain, &ca, &c->rcntr, NULL));
	OKR(fi_cntr_open(c->domain, &ca, &c->wcntr, NULL));
	OKR(fi_av_open(c->domain, &ava, &c->av, NULL));
	OKR(fi_endpoint(c->domain, c->info, &c->ep, NULL));
	OKR(fi_ep_bind(c->ep, &c->cq->fid, FI_TRANSMIT | FI_RECV));
	OKR(fi_ep_bind(c->ep, &c->scntr->fid, FI_SEND));
	OKR(fi_ep_bind(c->ep, &c->rcntr->fid, FI_RECV));
	OKR(fi_ep_bind(c->ep, &c->wcntr->fid, FI_REMOTE_WRITE));
	OKR(fi_ep_bind(c->ep, &c->av->fid, 0));
	OKR(fi_enable(c->ep));
	OKR(fi_mr_reg(c->domain, mem, memlen, FI_REMOTE_WRITE | FI_WRITE | FI_SEND | FI_RECV,
	              0, 0, 0, &c->mr, NULL));
	return fi_getname(&c->ep->fid, name, &len);
}

static void close_all(struct ctx *c)
{
	struct fid *f[] = {c->mr ? &c->mr->fid : NULL,       c->ep ? &c->ep->fid : NULL,
	                   c->av ? &c->av->fid : NULL,       c->scntr ? &c->scntr->fid : NULL,
	                   c->rcntr ? &c->rcntr->fid : NULL, c->wcntr ? &c->wcntr->fid : NULL,
	                   c->cq ? &c->cq->fid : NULL,       c->domain ? &c->domain->fid : NULL,
	                   c->fabric ? &c->fabric->fid : NULL};

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i])
			CHECK_INT(fi_close(f[i]), 0);
	fi_freeinfo(c->info);
}

static struct fi_triggered_context at(struct fid_cntr *c, size_t threshold)
{
	struct fi_triggered_context t = {.event_type = FI_TRIGGER_THRESHOLD};

	t.trigger.threshold.cntr = c;
	t.trigger.threshold.threshold = threshold;
	return t;
}

/* Misuse, on rank 0's own endpoint (nothing of it leaves the process). */
static void misuse(struct ctx *c, fi_addr_t self)
{
	struct ctx other = {0};
	char name[ET_SLOT], mem[8], b[8] = {0};
	struct fi_triggered_context t = at(c->scntr, 1000), t2;
	struct fi_msg msg = {.msg_iov = &(struct iovec){b, sizeof(b)}, .iov_count = 1,
	                     .addr = self};

	/* A counter of another domain, a trigger of another kind. */
	if (!open_ep(&other, name, sizeof(name), mem, sizeof(mem))) {
		t2 = at(other.scntr, 1);
		msg.context = &t2;
		CHECK_INT(fi_sendmsg(c->ep, &msg, FI_TRIGGER), -FI_EINVAL);
	}
	close_all(&other);
	t2 = at(c->scntr, 1);
	t2.event_type = FI_TRIGGER_XPU;
	msg.context = &t2;
	CHECK_INT(fi_sendmsg(c->ep, &msg, FI_TRIGGER), -FI_ENOSYS);
	/* Held: the endpoint and counter stay open; released by the counter. */
	msg.context = &t;
	CHECK_INT(fi_recvmsg(c->ep, &msg, FI_TRIGGER), 0);
	CHECK_INT(fi_close(&c->ep->fid), -FI_EBUSY);
	CHECK_INT(fi_close(&c->scntr->fid), -FI_EBUSY);
	CHECK_INT(fi_cntr_set(c->scntr, 1000), 0); /* the receive is posted */
	CHECK_INT(fi_cntr_set(c->scntr, 0), 0);
	/* A threshold already reached: issued at once (a send to itself). */
	t2 = at(c->rcntr, 0);
	msg.context = &t2;
	CHECK_INT(fi_sendmsg(c->ep, &msg, FI_TRIGGER), 0);
	{
		struct fi_cq_tagged_entry e;
		int sent = 0, got = 0;

		while (sent + got < 2 && et_read(c->cq, &e, NULL, NULL, NULL, TMO) == 1) {
			sent += (e.flags & FI_SEND) && e.op_context == &t2;
			got += (e.flags & FI_RECV) && e.op_context == &t;
		}
		CHECK_INT(sent, 1);
		CHECK_INT(got, 1);
	}
	CHECK_INT(fi_cntr_set(c->rcntr, 0), 0);
	CHECK_INT(fi_cntr_set(c->scntr, 0), 0);
}

/* Deferred work (fi_control(domain, FI_QUEUE_WORK)), on rank 0's own
 * endpoint: a send to itself and a counter set, released by one counter;
 * the send reports to completion_cntr and not to the CQ (no
 * FI_COMPLETION); a cancelled request never runs, a fired one cannot be
 * cancelled, a flush empties the queue. */
static void deferred(struct ctx *c, fi_addr_t self)
{
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fid_cntr *go = NULL, *done = NULL, *target = NULL;
	char b[16] = "deferred", in[16] = {0};
	struct iovec iov = {b, sizeof(b)};
	struct fi_op_msg send = {.ep = c->ep,
	                         .msg = {.msg_iov = &iov, .iov_count = 1, .addr = self}};
	struct fi_op_cntr set = {.value = 7}, never = {.value = 99};
	struct fi_deferred_work ws = {.threshold = 1, .op_type = FI_OP_SEND},
	                        wc = {.threshold = 1, .op_type = FI_OP_CNTR_SET},
	                        wx = {.threshold = 5, .op_type = FI_OP_CNTR_SET},
	                        wy = {.threshold = 6, .op_type = FI_OP_CNTR_ADD};
	struct fi_cq_tagged_entry e;

	CHECK_INT(fi_cntr_open(c->domain, &ca, &go, NULL), 0);
	CHECK_INT(fi_cntr_open(c->domain, &ca, &done, NULL), 0);
	CHECK_INT(fi_cntr_open(c->domain, &ca, &target, NULL), 0);
	if (!go || !done || !target)
		return;
	set.cntr = never.cntr = target;
	ws.triggering_cntr = wc.triggering_cntr = wx.triggering_cntr = wy.triggering_cntr = go;
	ws.completion_cntr = done;
	ws.op.msg = &send;
	wc.op.cntr = &set;
	wx.op.cntr = &never;
	wy.op.cntr = &never;
	CHECK_INT(fi_recv(c->ep, in, sizeof(in), NULL, FI_ADDR_UNSPEC, in), 0);
	CHECK_INT(fi_control(&c->domain->fid, FI_QUEUE_WORK, &ws), 0);
	CHECK_INT(fi_control(&c->domain->fid, FI_QUEUE_WORK, &wc), 0);
	CHECK_INT(fi_control(&c->domain->fid, FI_QUEUE_WORK, &wx), 0);
	CHECK_INT(fi_control(&c->domain->fid, FI_QUEUE_WORK, &wy), 0);
	CHECK_INT(fi_control(&c->domain->fid, FI_CANCEL_WORK, &wx), 0);
	CHECK_INT(fi_cntr_read(target), 0);
	CHECK_INT(fi_close(&go->fid), -FI_EBUSY); /* work waits on it */
	CHECK_INT(fi_cntr_add(go, 1), 0);
	CHECK_INT(fi_cntr_read(target), 7);
	CHECK_INT(et_read(c->cq, &e, NULL, NULL, NULL, TMO), 1);
	CHECK(e.flags & FI_RECV);
	CHECK_STR(in, "deferred");
	CHECK_INT(fi_cntr_wait(done, 1, TMO), 0);
	CHECK_INT(fi_cq_read(c->cq, &e, 1), -FI_EAGAIN); /* the send: no entry */
	CHECK_INT(fi_control(&c->domain->fid, FI_CANCEL_WORK, &ws), -FI_ENOENT);
	CHECK_INT(fi_control(&c->domain->fid, FI_FLUSH_WORK, NULL), 0);
	CHECK_INT(fi_cntr_add(go, 10), 0);
	CHECK_INT(fi_cntr_read(target), 7); /* wx cancelled, wy flushed */
	CHECK_INT(fi_close(&go->fid), 0);
	CHECK_INT(fi_close(&done->fid), 0);
	CHECK_INT(fi_close(&target->fid), 0);
}

/* Deferred work's send to the peer, whose completion_cntr is bound to no
 * endpoint: waiting on that counter alone moves the send until the peer
 * has it (on udp, until its acknowledgement is read). */
static void deferred_to_peer(struct ctx *c, fi_addr_t peer, const char *text)
{
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fid_cntr *go = NULL, *done = NULL;
	struct iovec iov = {(void *)text, strlen(text) + 1};
	struct fi_op_msg send = {.ep = c->ep,
	                         .msg = {.msg_iov = &iov, .iov_count = 1, .addr = peer}};
	struct fi_deferred_work w = {.threshold = 1, .op_type = FI_OP_SEND};

	CHECK_INT(fi_cntr_open(c->domain, &ca, &go, NULL), 0);
	CHECK_INT(fi_cntr_open(c->domain, &ca, &done, NULL), 0);
	if (!go || !done)
		return;
	w.triggering_cntr = go;
	w.completion_cntr = done;
	w.op.msg = &send;
	CHECK_INT(fi_control(&c->domain->fid, FI_QUEUE_WORK, &w), 0);
	CHECK_INT(fi_cntr_add(go, 1), 0);
	CHECK_INT(fi_cntr_wait(done, 1, TMO), 0);
	CHECK_INT(fi_cntr_readerr(done), 0);
	CHECK_INT(fi_close(&go->fid), 0);
	CHECK_INT(fi_close(&done->fid), 0);
}

static int body(int rank, int nprocs, void *arg)
{
	struct ctx c = {0};
	char name[ET_SLOT] = {0}, all[2 * ET_SLOT];
	static char mem[4096], reply[64], inbox[64];
	struct {
		uint64_t addr, key;
	} me, them;
	fi_addr_t peer = FI_ADDR_NOTAVAIL, self = FI_ADDR_NOTAVAIL;
	const char *hello = "hello, rank 1", *back = "the chain's send", *wrote = "the chain's write",
	           *later = "deferred, to rank 1";

	(void)nprocs, (void)arg;
	if (open_ep(&c, name, sizeof(name), mem, sizeof(mem))) {
		et_allgather("", 1, all);
		return 1;
	}
	CHECK_INT(et_allgather(name, strlen(name) + 1, all), 0);
	CHECK_INT(fi_av_insert(c.av, all + (1 - rank) * ET_SLOT, 1, &peer, 0, NULL), 1);
	CHECK_INT(fi_av_insert(c.av, name, 1, &self, 0, NULL), 1);
	me.addr = (uintptr_t)mem;
	me.key = fi_mr_key(c.mr);
	CHECK_INT(et_allgather(&me, sizeof(me), all), 0);
	memcpy(&them, all + (1 - rank) * ET_SLOT, sizeof(them));

	if (rank == 0) {
		struct fi_cq_tagged_entry e;

		misuse(&c, self);
		deferred(&c, self);
		OKR(fi_recv(c.ep, inbox, sizeof(inbox), NULL, FI_ADDR_UNSPEC, inbox));
		CHECK_INT(et_barrier(), 0); /* rank 1's chain is set */
		OKR(fi_send(c.ep, hello, strlen(hello) + 1, NULL, peer, (void *)hello));
		/* The chain's send, then its write. */
		for (int got = 0; !got;) {
			CHECK_INT(et_read(c.cq, &e, NULL, NULL, NULL, TMO), 1);
			if (e.flags & FI_RECV) {
				CHECK_STR(inbox, back);
				got = 1;
			}
		}
		for (uint64_t end = et_now_us() + TMO * 1000ull;
		     fi_cntr_read(c.wcntr) < 1 && et_now_us() < end;)
			;
		CHECK_INT(fi_cntr_read(c.wcntr), 1);
		CHECK_STR(mem, wrote);
		deferred_to_peer(&c, peer, later);
	} else {
		struct fi_triggered_context tsend = at(c.rcntr, 1), twrite = at(c.scntr, 1);
		struct iovec iov = {reply, strlen(back) + 1};
		struct fi_msg msg = {.msg_iov = &iov, .iov_count = 1, .addr = peer,
		                     .context = &tsend};
		struct iovec wiov = {mem + 1024, strlen(wrote) + 1};
		struct fi_rma_iov rma = {them.addr, strlen(wrote) + 1, them.key};
		struct fi_msg_rma wmsg = {.msg_iov = &wiov, .iov_count = 1, .addr = peer,
		                          .rma_iov = &rma, .rma_iov_count = 1, .context = &twrite};

		strcpy(reply, back);
		strcpy(mem + 1024, wrote);
		OKR(fi_writemsg(c.ep, &wmsg, FI_TRIGGER));
		OKR(fi_sendmsg(c.ep, &msg, FI_TRIGGER));
		OKR(fi_recv(c.ep, inbox, sizeof(inbox), NULL, FI_ADDR_UNSPEC, inbox));
		CHECK_INT(et_barrier(), 0);
		/* Only completions read from here: the chain runs by itself,
		 * each step reporting with its triggered context. */
		{
			struct fi_cq_tagged_entry e;
			int recv = 0, sent = 0, written = 0;

			while (!written && et_read(c.cq, &e, NULL, NULL, NULL, TMO) == 1) {
				recv += e.op_context == inbox;
				sent += e.op_context == &tsend;
				written += e.op_context == &twrite;
			}
			CHECK_INT(recv, 1);
			CHECK_INT(sent, 1);
			CHECK_INT(written, 1);
		}
		CHECK_INT(fi_cntr_read(c.scntr), 1); /* the send; writes count apart */
		CHECK_INT(fi_cntr_read(c.rcntr), 1);
		CHECK_STR(inbox, hello);
		/* Rank 0's deferred send, once its chain is done. */
		OKR(fi_recv(c.ep, inbox, sizeof(inbox), NULL, FI_ADDR_UNSPEC, inbox));
		for (;;) {
			struct fi_cq_tagged_entry e;
			int r = (int)et_read(c.cq, &e, NULL, NULL, NULL, TMO);

			CHECK_INT(r, 1);
			if (r != 1 || e.op_context == inbox)
				break;
		}
		CHECK_STR(inbox, later);
	}
	CHECK_INT(et_barrier(), 0);
	close_all(&c);
	return check_done();
}

int main(void)
{
	return et_run("triggered", 2, 60, body, NULL, 0);
}
