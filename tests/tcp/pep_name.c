/* pep_name.c - socket-like naming of the tcp provider's FI_EP_MSG
 * endpoints, public API only: a passive endpoint opened without a source
 * address and named afterwards with fi_setname (an address as getaddrinfo
 * gives it), and an active endpoint that takes a passive endpoint's address
 * through fi_info.handle (man fi_endpoint), keeping it through the
 * connection.  The pattern of fabtests' msg_sockets. */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "check.h"
#include "eptest.h"
#include "side.h"

#define SERVER 0
#define CLIENT 1
#define EV_MS  5000
#define MSG    "hello through a borrowed name"

/* An fi_eq_read buffer: the entry and room for connection data. */
union cm_ev {
	struct fi_eq_cm_entry e;
	unsigned char b[sizeof(struct fi_eq_cm_entry) + 256];
};

static struct fi_info *msg_hints(void)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		return NULL;
	h->fabric_attr->prov_name = strdup("tcp");
	h->ep_attr->type = FI_EP_MSG;
	h->caps = FI_MSG;
	h->addr_format = FI_SOCKADDR_IN;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	return h;
}

static ssize_t next_event(struct fid_eq *eq, uint32_t *event, union cm_ev *ev)
{
	ssize_t r;

	memset(ev, 0, sizeof(*ev));
	*event = ~0u;
	r = fi_eq_sread(eq, event, ev, sizeof(*ev), EV_MS, 0);
	if (r < 0)
		fprintf(stderr, "fi_eq_sread: %zd (%s)\n", r, fi_strerror((int)-r));
	return r;
}

static void check_name(const struct sockaddr_in *got, const struct sockaddr_in *want,
                       const char *what)
{
	char g[INET_ADDRSTRLEN] = "?", w[INET_ADDRSTRLEN] = "?";

	if (got->sin_family == want->sin_family && got->sin_port == want->sin_port &&
	    got->sin_addr.s_addr == want->sin_addr.s_addr)
		return;
	inet_ntop(AF_INET, &got->sin_addr, g, sizeof(g));
	inet_ntop(AF_INET, &want->sin_addr, w, sizeof(w));
	fprintf(stderr, "%s: %s:%u (family %u), want %s:%u\n", what, g,
	        ntohs(got->sin_port), got->sin_family, w, ntohs(want->sin_port));
	CHECK(0);
}

static int name_of(fid_t fid, struct sockaddr_in *out)
{
	size_t len = sizeof(*out);

	memset(out, 0, sizeof(*out));
	OK(fi_getname(fid, out, &len));
	CHECK_INT(len, sizeof(*out));
	return 0;
}

/* A passive endpoint opened with no source address (its info's taken
 * away, as fabtests' msg_sockets does), then named 127.0.0.1 and port
 * by fi_setname with the sockaddr getaddrinfo makes of them ("0": any
 * port, which fi_getname then tells). */
static int named_pep(struct side *s, const char *port, struct fid_pep **pep,
                     struct sockaddr_in *name)
{
	struct fi_info *hints = msg_hints();
	struct addrinfo aih = {.ai_flags = AI_PASSIVE, .ai_family = AF_INET}, *ai = NULL;
	void *src;
	size_t srclen;
	int ret;

	if (!hints)
		return 2;
	OK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, FI_SOURCE, hints, &s->info));
	fi_freeinfo(hints);
	OK(open_side(s, true));
	src = s->info->src_addr;
	srclen = s->info->src_addrlen;
	s->info->src_addr = NULL;
	s->info->src_addrlen = 0;
	ret = fi_passive_ep(s->fabric, s->info, pep, NULL);
	s->info->src_addr = src;
	s->info->src_addrlen = srclen;
	OK(ret);
	CHECK_INT(getaddrinfo("127.0.0.1", port, &aih, &ai), 0);
	if (!ai)
		return 1;
	ret = fi_setname(&(*pep)->fid, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	OK(ret);
	OK(name_of(&(*pep)->fid, name));
	CHECK_HEX(ntohl(name->sin_addr.s_addr), INADDR_LOOPBACK);
	CHECK(name->sin_port != 0);
	return 0;
}

static int server(void)
{
	struct side s = {0};
	struct fid_pep *pep = NULL;
	struct fid_ep *ep = NULL;
	struct sockaddr_in name, again, cl, peer,
	    all[ET_MAX_PROCS * ET_SLOT / sizeof(name)];
	char buf[64] = {0};
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	struct fi_info *creq;
	union cm_ev ev;
	uint32_t event;
	int ctx, rctx;
	ssize_t r;

	OK(named_pep(&s, "0", &pep, &name));
	/* Named again before listening, its port now given explicitly (as
	 * fabtests' msg_sockets names one): the same name, kept. */
	OK(fi_setname(&pep->fid, &name, sizeof(name)));
	OK(name_of(&pep->fid, &again));
	check_name(&again, &name, "server pep after its second fi_setname");
	OK(fi_pep_bind(pep, &s.eq->fid, 0));
	OK(fi_listen(pep));
	OK(name_of(&pep->fid, &again));
	check_name(&again, &name, "server pep listening");
	CHECK_INT(et_allgather(&name, sizeof(name), all), 0);
	memcpy(&cl, (char *)all + CLIENT * ET_SLOT, sizeof(cl));

	r = next_event(s.eq, &event, &ev);
	CHECK_INT(event, FI_CONNREQ);
	creq = ev.e.info;
	if (r < 0 || event != FI_CONNREQ || !creq)
		return 1;
	/* The request comes from the name the client's passive endpoint had. */
	CHECK_INT(creq->dest_addrlen, sizeof(peer));
	if (creq->dest_addr && creq->dest_addrlen == sizeof(peer))
		check_name(creq->dest_addr, &cl, "FI_CONNREQ dest_addr");
	OK(fi_domain(s.fabric, creq, &s.domain, NULL));
	{
		struct fi_cq_attr cqa = {.size = 64, .format = FI_CQ_FORMAT_TAGGED};

		OK(fi_cq_open(s.domain, &cqa, &s.cq, NULL));
	}
	OK(open_ep(&s, creq, &ep, &ctx));
	OK(fi_recv(ep, buf, sizeof(buf), NULL, 0, &rctx));
	OK(fi_accept(ep, NULL, 0));
	fi_freeinfo(creq);
	r = next_event(s.eq, &event, &ev);
	CHECK_INT(event, FI_CONNECTED);
	CHECK(ev.e.fid == &ep->fid);
	{
		size_t len = sizeof(peer);

		OK(fi_getpeer(ep, &peer, &len));
		check_name(&peer, &cl, "server fi_getpeer");
	}
	OK(name_of(&ep->fid, &again));
	check_name(&again, &name, "server ep");
	r = et_read(s.cq, &c, NULL, &err, NULL, EV_MS);
	CHECK_INT(r, 1);
	if (r == 1) {
		CHECK(c.op_context == &rctx);
		CHECK_INT(c.len, sizeof(MSG));
		CHECK_STR(buf, MSG);
	}
	CHECK_INT(et_barrier(), 0);
	CHECK_INT(fi_close(&ep->fid), 0);
	CHECK_INT(fi_close(&pep->fid), 0);
	close_side(&s);
	return 0;
}

static int client(void)
{
	struct side s = {0}, a = {0};
	struct fi_info *hints = msg_hints();
	struct fid_pep *pep = NULL;
	struct fid_ep *ep = NULL;
	struct sockaddr_in name, now, srv, all[ET_MAX_PROCS * ET_SLOT / sizeof(name)];
	struct fi_cq_tagged_entry c;
	struct fi_cq_err_entry err;
	char port[16];
	union cm_ev ev;
	uint32_t event;
	int ctx, sctx;
	ssize_t r;

	if (!hints)
		return 2;
	OK(named_pep(&s, "0", &pep, &name));
	CHECK_INT(et_allgather(&name, sizeof(name), all), 0);
	memcpy(&srv, (char *)all + SERVER * ET_SLOT, sizeof(srv));

	/* man fi_getinfo: a passive endpoint as hints->handle comes back
	 * in info->handle. */
	snprintf(port, sizeof(port), "%u", ntohs(srv.sin_port));
	hints->handle = &pep->fid;
	OK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", port, 0, hints, &a.info));
	hints->handle = NULL;
	fi_freeinfo(hints);
	CHECK(a.info->handle == &pep->fid);
	a.fabric = s.fabric; /* one fabric and EQ for both */
	a.eq = s.eq;
	OK(fi_domain(a.fabric, a.info, &a.domain, NULL));
	{
		struct fi_cq_attr cqa = {.size = 64, .format = FI_CQ_FORMAT_TAGGED};

		OK(fi_cq_open(a.domain, &cqa, &a.cq, NULL));
	}
	/* The active endpoint takes the passive one's name; the passive
	 * one is then only closed (man fi_endpoint). */
	OK(fi_endpoint(a.domain, a.info, &ep, &ctx));
	OK(name_of(&ep->fid, &now));
	check_name(&now, &name, "client ep from the pep");
	CHECK_INT(fi_close(&pep->fid), 0);
	OK(fi_ep_bind(ep, &a.eq->fid, 0));
	OK(fi_ep_bind(ep, &a.cq->fid, FI_TRANSMIT | FI_RECV));
	OK(fi_enable(ep));
	OK(name_of(&ep->fid, &now));
	check_name(&now, &name, "client ep enabled");
	OK(fi_connect(ep, a.info->dest_addr, NULL, 0));
	r = next_event(a.eq, &event, &ev);
	CHECK_INT(event, FI_CONNECTED);
	if (r < 0 || event != FI_CONNECTED)
		return 1;
	OK(name_of(&ep->fid, &now));
	check_name(&now, &name, "client ep connected");
	OK(fi_send(ep, MSG, sizeof(MSG), NULL, 0, &sctx));
	r = et_read(a.cq, &c, NULL, &err, NULL, EV_MS);
	CHECK_INT(r, 1);
	CHECK(r != 1 || c.op_context == &sctx);
	CHECK_INT(et_barrier(), 0);
	CHECK_INT(fi_close(&ep->fid), 0);
	a.fabric = NULL;
	a.eq = NULL;
	close_side(&a);
	close_side(&s);
	return 0;
}

static int pair(int rank, int nprocs, void *arg)
{
	(void)nprocs, (void)arg;
	if (rank == SERVER ? server() : client())
		CHECK(0);
	return check_done();
}

int main(void)
{
	return et_run("tcp/pep_name: fi_setname on a pep, an ep taking its name", 2, 60,
	              pair, NULL, 0);
}
