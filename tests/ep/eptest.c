/* eptest.c - the group runner (fork, coordinate, time out, reap) and the
 * endpoint setup shared by the multi-process endpoint tests (tests/ep, and
 * tests/shm and tests/tcp); public API only. */
#include "eptest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* In a child: its end of the socket to the coordinator, and the group. */
static int et_sock = -1;
static int et_rank, et_nprocs;

uint64_t et_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int full_io(int fd, void *buf, size_t len, bool wr)
{
	char *p = buf;

	while (len) {
		ssize_t n = wr ? write(fd, p, len) : read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int et_allgather(const void *mine, size_t len, void *all)
{
	char slot[ET_SLOT] = {0};

	if (len > ET_SLOT || et_sock < 0)
		return -FI_EINVAL;
	memcpy(slot, mine, len);
	if (full_io(et_sock, slot, ET_SLOT, true) ||
	    full_io(et_sock, all, (size_t)et_nprocs * ET_SLOT, false)) {
		fprintf(stderr, "rank %d: lost the coordinator\n", et_rank);
		return -FI_EIO;
	}
	return 0;
}

int et_barrier(void)
{
	char all[ET_MAX_PROCS * ET_SLOT];

	return et_allgather("", 0, all);
}

int et_barrier_progress(struct et_ep *e)
{
	char slot[ET_SLOT] = {0}, all[ET_MAX_PROCS * ET_SLOT];
	struct pollfd p = {.fd = et_sock, .events = POLLIN};

	if (et_sock < 0 || full_io(et_sock, slot, ET_SLOT, true))
		return -FI_EIO;
	while (poll(&p, 1, 1) == 0 || (p.revents & (POLLIN | POLLHUP)) == 0)
		et_progress(e);
	if (full_io(et_sock, all, (size_t)et_nprocs * ET_SLOT, false)) {
		fprintf(stderr, "rank %d: lost the coordinator\n", et_rank);
		return -FI_EIO;
	}
	return 0;
}

/* ---- the coordinator (the parent) ---------------------------------------- */

struct member {
	pid_t pid;
	int fd;  /* -1 once it hung up */
	bool in; /* contributed to the current round */
	size_t got;
	bool reaped;
	int status;
};

/* Reap whatever ended; true when all have. */
static bool reap(struct member *m, int n, bool block)
{
	bool all = true;

	for (int i = 0; i < n; i++) {
		if (m[i].reaped)
			continue;
		pid_t r = waitpid(m[i].pid, &m[i].status, block ? 0 : WNOHANG);

		if (r == m[i].pid)
			m[i].reaped = true;
		else
			all = false;
	}
	return all;
}

static void coordinate(struct member *m, int n, uint64_t deadline)
{
	char slots[ET_MAX_PROCS * ET_SLOT];

	memset(slots, 0, sizeof(slots));
	for (;;) {
		struct pollfd pfd[ET_MAX_PROCS];
		int live = 0, waiting = 0, k = 0, idx[ET_MAX_PROCS];
		uint64_t now = et_now_us();

		for (int i = 0; i < n; i++) {
			if (m[i].fd < 0)
				continue;
			live++;
			if (m[i].in)
				continue;
			waiting++;
			pfd[k].fd = m[i].fd;
			pfd[k].events = POLLIN;
			idx[k++] = i;
		}
		if (!live)
			return;
		if (!waiting) {
			/* Everyone still here has spoken: answer them all. */
			for (int i = 0; i < n; i++) {
				if (m[i].fd < 0)
					continue;
				if (full_io(m[i].fd, slots, (size_t)n * ET_SLOT, true)) {
					close(m[i].fd);
					m[i].fd = -1;
				}
				m[i].in = false;
				m[i].got = 0;
			}
			memset(slots, 0, sizeof(slots));
			continue;
		}
		if (now >= deadline)
			return;
		if (poll(pfd, (nfds_t)k, (int)((deadline - now) / 1000 + 1)) < 0 &&
		    errno != EINTR)
			return;
		for (int j = 0; j < k; j++) {
			struct member *c = &m[idx[j]];
			ssize_t r;

			if (!pfd[j].revents)
				continue;
			r = read(c->fd, slots + idx[j] * ET_SLOT + c->got,
			         ET_SLOT - c->got);
			if (r <= 0) {
				/* Gone (finished, crashed or killed): its slot
				 * stays zero from now on. */
				memset(slots + idx[j] * ET_SLOT, 0, ET_SLOT);
				close(c->fd);
				c->fd = -1;
				continue;
			}
			c->got += (size_t)r;
			if (c->got == ET_SLOT)
				c->in = true;
		}
	}
}


/* LOOM_TEST_NETNS_ODD names a network namespace (/var/run/netns/...) the
 * odd ranks run in: processes of one run on two "hosts" (udp/loss's two
 * namespaces joined by a veth pair).  1 when it cannot be entered. */
static int odd_netns(int rank)
{
	const char *path = getenv("LOOM_TEST_NETNS_ODD");
	int fd;

	if (!path || !(rank & 1))
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET)) {
		fprintf(stderr, "rank %d: cannot enter %s: %s\n", rank, path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	close(fd);
	return 0;
}

int et_run(const char *what, int nprocs, int timeout_s, et_fn fn, void *arg,
           unsigned may_die)
{
	struct member m[ET_MAX_PROCS];
	uint64_t deadline = et_now_us() + (uint64_t)timeout_s * 1000000u;
	int bad = 0;

	if (nprocs < 1 || nprocs > ET_MAX_PROCS)
		return 1;
	/* A rank allowed to die leaves its socket without a reader: answering
	 * it must be an EPIPE the coordinator handles, not a fatal signal. */
	signal(SIGPIPE, SIG_IGN);
	fflush(NULL);
	for (int i = 0; i < nprocs; i++) {
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
			perror("socketpair");
			return 1;
		}
		m[i] = (struct member){.fd = sv[0]};
		m[i].pid = fork();
		if (m[i].pid == 0) {
			close(sv[0]);
			for (int j = 0; j < i; j++)
				if (m[j].fd >= 0)
					close(m[j].fd);
			et_sock = sv[1];
			et_rank = i;
			et_nprocs = nprocs;
			if (odd_netns(i))
				_exit(1);
			/* The coordinator kills on its own deadline; this one
			 * covers a coordinator that died. */
			alarm((unsigned)timeout_s + 5);
			_exit(fn(i, nprocs, arg));
		}
		close(sv[1]);
		if (m[i].pid < 0) {
			perror("fork");
			m[i].reaped = true;
			m[i].status = 1 << 8;
			close(m[i].fd);
			m[i].fd = -1;
		}
	}
	coordinate(m, nprocs, deadline);
	while (!reap(m, nprocs, false) && et_now_us() < deadline)
		usleep(2000);
	if (!reap(m, nprocs, false)) {
		fprintf(stderr, "%s: timed out after %d s, killing the group\n", what,
		        timeout_s);
		bad++;
		for (int i = 0; i < nprocs; i++)
			if (!m[i].reaped)
				kill(m[i].pid, SIGKILL);
		reap(m, nprocs, true);
	}
	for (int i = 0; i < nprocs; i++) {
		int s = m[i].status;

		if (m[i].fd >= 0)
			close(m[i].fd);
		if (WIFEXITED(s) && WEXITSTATUS(s) == 0)
			continue;
		if (WIFSIGNALED(s) && WTERMSIG(s) == SIGKILL && (may_die & (1u << i)))
			continue;
		bad++;
		if (WIFSIGNALED(s))
			fprintf(stderr, "%s: rank %d killed by signal %d\n", what, i,
			        WTERMSIG(s));
		else
			fprintf(stderr, "%s: rank %d exited with %d\n", what, i,
			        WEXITSTATUS(s));
	}
	fprintf(stderr, "%s: %s\n", what, bad ? "FAILED" : "passed");
	return bad ? 1 : 0;
}

/* ---- endpoints -------------------------------------------------------------- */

#define TRY(call)                                                                        \
	do {                                                                             \
		int r_ = (int)(call);                                                    \
		if (r_) {                                                                \
			fprintf(stderr, "rank %d: %s = %d (%s)\n", e->rank, #call, r_,   \
			        fi_strerror(-r_));                                       \
			return r_ < 0 ? r_ : -FI_EOTHER;                                 \
		}                                                                        \
	} while (0)

const char *et_prov(void)
{
	const char *p = getenv("LOOM_TEST_PROV");

	return p && *p ? p : "shm";
}

const struct test_prov *et_desc(void)
{
	const struct test_prov *d = test_prov_find(et_prov());

	if (!d) {
		fprintf(stderr, "provider %s is not described in tests/lib/provs.h\n", et_prov());
		exit(2);
	}
	return d;
}

const char *et_link(void)
{
	const struct test_prov *d = et_desc();
	const char *on = d->shm_param ? getenv(d->shm_param) : NULL;

	if (!d->shm_param)
		return d->name;
	if (on && (!strcmp(on, "0") || !strcasecmp(on, "no") || !strcasecmp(on, "false") ||
	           !strcasecmp(on, "off")))
		return d->name;
	return "shm";
}

int et_open_local(struct et_ep *e, const struct et_opts *o)
{
	static const struct et_opts none;
	struct fi_info *hints;
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED};
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	uint64_t cq_flags;
	size_t len;
	int ret;

	if (!o)
		o = &none;
	memset(e, 0, sizeof(*e));
	e->rank = et_rank;
	e->nprocs = et_nprocs;
	if (o->no_cma)
		setenv("FI_SHM_DISABLE_CMA", "1", 1);
	hints = fi_allocinfo();
	if (!hints)
		return -FI_ENOMEM;
	hints->fabric_attr->prov_name = strdup(et_prov());
	hints->ep_attr->type = FI_EP_RDM;
	hints->addr_format = FI_ADDR_STR; /* names travel as text */
	hints->caps =
	    o->caps ? o->caps : FI_MSG | FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV;
	hints->tx_attr->op_flags = o->tx_op_flags;
	hints->tx_attr->size = o->tx_size;
	hints->rx_attr->size = o->rx_size;
	hints->rx_attr->total_buffered_recv = o->unexp_max;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	hints->domain_attr->threading = o->threading;
	/* LOOM_TEST_NODE: the source address to use (e.g. ::1 for IPv6). */
	ret = fi_getinfo(o->version ? o->version : FI_VERSION(1, 17),
	                 getenv("LOOM_TEST_NODE"), NULL,
	                 getenv("LOOM_TEST_NODE") ? FI_SOURCE : 0, hints, &e->info);
	fi_freeinfo(hints);
	TRY(ret);
	if (strcmp(e->info->fabric_attr->prov_name, et_prov())) {
		fprintf(stderr, "rank %d: provider %s, not %s\n", e->rank,
		        e->info->fabric_attr->prov_name, et_prov());
		return -FI_ENODATA;
	}
	TRY(fi_fabric(e->info->fabric_attr, &e->fabric, NULL));
	TRY(fi_domain(e->fabric, e->info, &e->domain, NULL));
	TRY(fi_av_open(e->domain, &ava, &e->av, NULL));
	TRY(fi_endpoint(e->domain, e->info, &e->ep, NULL));
	cqa.size = o->cq_size ? o->cq_size : 4096;
	if (o->cq_format == ET_CQ_UNSPEC)
		cqa.format = FI_CQ_FORMAT_UNSPEC;
	else if (o->cq_format)
		cqa.format = (enum fi_cq_format)o->cq_format;
	cqa.wait_obj = o->wait;
	TRY(fi_cq_open(e->domain, &cqa, &e->txcq, NULL));
	cq_flags = o->selective ? FI_SELECTIVE_COMPLETION : 0;
	if (o->split_cq) {
		TRY(fi_cq_open(e->domain, &cqa, &e->rxcq, NULL));
		TRY(fi_ep_bind(e->ep, &e->txcq->fid, FI_TRANSMIT | cq_flags));
		TRY(fi_ep_bind(e->ep, &e->rxcq->fid, FI_RECV | cq_flags));
	} else {
		e->rxcq = e->txcq;
		TRY(fi_ep_bind(e->ep, &e->txcq->fid, FI_TRANSMIT | FI_RECV | cq_flags));
	}
	if (o->cntrs) {
		TRY(fi_cntr_open(e->domain, &ca, &e->scntr, NULL));
		TRY(fi_cntr_open(e->domain, &ca, &e->rcntr, NULL));
		TRY(fi_ep_bind(e->ep, &e->scntr->fid, FI_SEND));
		TRY(fi_ep_bind(e->ep, &e->rcntr->fid, FI_RECV));
	}
	if (o->remote_cntrs) {
		TRY(fi_cntr_open(e->domain, &ca, &e->rrcntr, NULL));
		TRY(fi_cntr_open(e->domain, &ca, &e->rwcntr, NULL));
		TRY(fi_ep_bind(e->ep, &e->rrcntr->fid, FI_REMOTE_READ));
		TRY(fi_ep_bind(e->ep, &e->rwcntr->fid, FI_REMOTE_WRITE));
	}
	TRY(fi_ep_bind(e->ep, &e->av->fid, 0));
	if (o->setname)
		TRY(fi_setname(&e->ep->fid, (void *)o->setname, strlen(o->setname) + 1));
	TRY(fi_enable(e->ep));
	len = sizeof(e->name);
	TRY(fi_getname(&e->ep->fid, e->name, &len));
	/* LOOM_TEST_NAME_PREFIX: proof the endpoint has the kind of address
	 * asked for (e.g. fi_sockaddr_in6://). */
	if (getenv("LOOM_TEST_NAME_PREFIX") &&
	    strncmp(e->name, getenv("LOOM_TEST_NAME_PREFIX"),
	            strlen(getenv("LOOM_TEST_NAME_PREFIX")))) {
		fprintf(stderr, "rank %d: endpoint name %s, not %s...\n", e->rank,
		        e->name, getenv("LOOM_TEST_NAME_PREFIX"));
		return -FI_EADDRNOTAVAIL;
	}
	for (int i = 0; i < ET_MAX_PROCS; i++)
		e->addr[i] = FI_ADDR_NOTAVAIL;
	return 0;
}

struct et_hello {
	int32_t pid;
	char name[ET_SLOT - 4];
};

int et_open(struct et_ep *e, const struct et_opts *o)
{
	struct et_hello me = {0}, all[ET_MAX_PROCS];
	int ret = et_open_local(e, o);

	_Static_assert(sizeof(struct et_hello) == ET_SLOT, "one slot");
	/* Join the exchange even after a failure so the others do not wait. */
	if (!ret) {
		me.pid = (int32_t)getpid();
		memcpy(me.name, e->name, strnlen(e->name, sizeof(me.name) - 1));
	}
	if (et_allgather(&me, sizeof(me), all))
		return -FI_EIO;
	if (ret)
		return ret;
	for (int r = 0; r < e->nprocs; r++) {
		e->pid[r] = all[r].pid;
		memcpy(e->peer_name[r], all[r].name, sizeof(all[r].name));
		if (!all[r].pid)
			continue;
		ret = fi_av_insert(e->av, all[r].name, 1, &e->addr[r], 0, NULL);
		if (ret != 1) {
			fprintf(stderr, "rank %d: fi_av_insert(%s) = %d\n", e->rank,
			        all[r].name, ret);
			return ret < 0 ? ret : -FI_EINVAL;
		}
	}
	return 0;
}

int et_close(struct et_ep *e)
{
	struct fid *fids[] = {
	    e->ep ? &e->ep->fid : NULL,
	    e->av ? &e->av->fid : NULL,
	    e->rxcq && e->rxcq != e->txcq ? &e->rxcq->fid : NULL,
	    e->txcq ? &e->txcq->fid : NULL,
	    e->scntr ? &e->scntr->fid : NULL,
	    e->rcntr ? &e->rcntr->fid : NULL,
	    e->rrcntr ? &e->rrcntr->fid : NULL,
	    e->rwcntr ? &e->rwcntr->fid : NULL,
	    e->domain ? &e->domain->fid : NULL,
	    e->fabric ? &e->fabric->fid : NULL,
	};
	int first = 0;

	for (size_t i = 0; i < sizeof(fids) / sizeof(fids[0]); i++) {
		int r = fids[i] ? fi_close(fids[i]) : 0;

		if (r && !first) {
			fprintf(stderr, "rank %d: fi_close #%zu = %d\n", e->rank, i, r);
			first = r;
		}
	}
	fi_freeinfo(e->info);
	memset(e, 0, sizeof(*e));
	return first;
}

void et_progress(struct et_ep *e)
{
	fi_cq_read(e->txcq, NULL, 0);
	if (e->rxcq != e->txcq)
		fi_cq_read(e->rxcq, NULL, 0);
}

ssize_t et_read(struct fid_cq *cq, struct fi_cq_tagged_entry *ent, fi_addr_t *src,
                struct fi_cq_err_entry *err, char *errbuf, int timeout_ms)
{
	uint64_t end = et_now_us() + (uint64_t)timeout_ms * 1000u;
	unsigned spins = 0;

	for (;;) {
		ssize_t r =
		    src ? fi_cq_readfrom(cq, ent, 1, src) : fi_cq_read(cq, ent, 1);

		if (r == 1)
			return 1;
		if (r == -FI_EAVAIL) {
			struct fi_cq_err_entry tmp;

			if (!err)
				err = &tmp;
			memset(err, 0, sizeof(*err));
			if (errbuf) {
				err->err_data = errbuf;
				err->err_data_size = ET_ERRBUF;
			}
			if (fi_cq_readerr(cq, err, 0) != 1)
				return -FI_EOTHER;
			if (errbuf) {
				/* Keep it a string whatever the provider wrote. */
				size_t n = err->err_data_size < ET_ERRBUF
				               ? err->err_data_size
				               : ET_ERRBUF - 1;
				errbuf[n] = 0;
			}
			return -FI_EAVAIL;
		}
		if (r != -FI_EAGAIN)
			return r;
		if (et_now_us() > end)
			return -FI_ETIMEDOUT;
		/* Two cores, up to four processes: let the peers run. */
		if (++spins % 64 == 0)
			sched_yield();
	}
}

static inline uint8_t pattern(uint64_t seed, size_t i)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + (i >> 3) * 0xbf58476d1ce4e5b9ULL;

	x ^= x >> 29;
	return (uint8_t)(x >> ((i & 7) * 8));
}

void et_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *b = buf;

	for (size_t i = 0; i < len; i++)
		b[i] = pattern(seed, i);
}

size_t et_verify(const void *buf, size_t len, uint64_t seed)
{
	const uint8_t *b = buf;

	for (size_t i = 0; i < len; i++)
		if (b[i] != pattern(seed, i))
			return i;
	return (size_t)-1;
}

/* ---- peers that end ------------------------------------------------------------ */

bool et_gone(pid_t pid)
{
	char path[64], st[512];
	const char *p = NULL;
	FILE *f;

	if (kill(pid, 0))
		return true;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return true;
	if (fgets(st, sizeof(st), f))
		p = strrchr(st, ')');
	fclose(f);
	return p && p[1] == ' ' && p[2] == 'Z';
}

int et_regions_of(pid_t pid)
{
	char prefix[64];
	struct dirent *d;
	DIR *dir = opendir("/dev/shm");
	int n = 0;

	snprintf(prefix, sizeof(prefix), "loom-%u-%d-", (unsigned)getuid(), (int)pid);
	if (!dir)
		return -1;
	while ((d = readdir(dir)))
		if (!strncmp(d->d_name, prefix, strlen(prefix)))
			n++;
	closedir(dir);
	return n;
}

size_t et_edge_sizes(const size_t **sizes)
{
	const struct test_prov *d = test_prov_find(et_link());

	*sizes = d->edges;
	return d->nedges;
}

int et_stray(struct et_ep *e, int ms)
{
	static char junk[2][64];
	struct fi_cq_tagged_entry ent;
	int ctx[2], n = 0;

	if (fi_recv(e->ep, junk[0], sizeof(junk[0]), NULL, FI_ADDR_UNSPEC, &ctx[0]) ||
	    fi_trecv(e->ep, junk[1], sizeof(junk[1]), NULL, FI_ADDR_UNSPEC, 0, ~0ull,
	             &ctx[1]))
		return -1;
	while (et_read(e->rxcq, &ent, NULL, NULL, NULL, ms) != -FI_ETIMEDOUT)
		n++;
	fi_cancel(&e->ep->fid, &ctx[0]);
	fi_cancel(&e->ep->fid, &ctx[1]);
	/* The cancellations' own entries. */
	while (et_read(e->rxcq, &ent, NULL, NULL, NULL, 10) != -FI_ETIMEDOUT)
		;
	return n;
}
