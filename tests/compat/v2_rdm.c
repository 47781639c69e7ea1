/* v2_rdm.c - a libfabric 2.x program, built against libfabric 2.6's headers
 * and linked against its library, as the 2.x tutorials build one; run with
 * LD_LIBRARY_PATH=<loom build>/src it runs on loom.  It proves which library
 * it loaded (/proc/self/maps), asks fi_getinfo for FI_VERSION(2, 0) with 2.x
 * hints, opens the fabric with fi_fabric2, and moves a message and two
 * tagged messages (one matched through ignore bits) between two processes
 * over an RDM endpoint.  The 2.x receive capability bits loom implements
 * (FI_TAGGED_DIRECTED_RECV, FI_TAGGED_MULTI_RECV, FI_EXACT_DIRECTED_RECV)
 * are served to hints asking for them; of them only the secondary one,
 * FI_TAGGED_MULTI_RECV, is reported to hints that did not (tests/shm/
 * recv_caps.c uses them).  (FI_AUTH_KEY is an fi_av_insert flag sharing
 * FI_SOURCE's bit, not a capability.)
 *
 * usage: v2_rdm <provider> <port> <dir of the libfabric.so.1 to expect>
 *               <loom|ref>
 * The port (and port + 1) name the tcp endpoints; with "ref" (libfabric 2.6
 * itself, a check of this program) the new capability bits are only
 * reported. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#if FI_MAJOR_VERSION < 2
#error "v2_rdm must be built against libfabric 2.x headers"
#endif

static int failures;

#define CHECK(cond)                                                                      \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "[%d] %s:%d: CHECK(%s) failed\n", (int)getpid(), \
			        __FILE__, __LINE__, #cond);                              \
			failures++;                                                      \
		}                                                                        \
	} while (0)

#define CHECK_RET(call)                                                                  \
	do {                                                                             \
		int r_ = (call);                                                         \
		if (r_) {                                                                \
			fprintf(stderr, "[%d] %s:%d: %s = %d (%s)\n", (int)getpid(),     \
			        __FILE__, __LINE__, #call, r_, fi_strerror(-r_));        \
			failures++;                                                      \
			return -1;                                                       \
		}                                                                        \
	} while (0)

#define MSG_TEXT    "hello from a 2.x program"
#define TAG_EXACT   0x1234ULL
#define TAG_IGNORED 0x5a7ULL /* sent; received as 0x500 with ignore 0xff */

struct peer {
	const char *prov;
	int port;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	fi_addr_t remote;
};

/* The libfabric this process mapped must be the one want_dir's
 * libfabric.so.1 link leads to, and no other libfabric may be mapped. */
static void check_loaded(const char *want_dir)
{
	char link[PATH_MAX], want[PATH_MAX], line[PATH_MAX + 256], seen[PATH_MAX] = "";
	FILE *maps = fopen("/proc/self/maps", "r");
	int found = 0;

	snprintf(link, sizeof(link), "%s/libfabric.so.1", want_dir);
	if (!maps || !realpath(link, want)) {
		fprintf(stderr, "cannot read /proc/self/maps or resolve %s\n", link);
		failures++;
		if (maps)
			fclose(maps);
		return;
	}
	while (fgets(line, sizeof(line), maps)) {
		char *path = strchr(line, '/'), real[PATH_MAX];

		if (!path || !strstr(path, "/libfabric.so"))
			continue;
		path[strcspn(path, "\n")] = '\0';
		if (!realpath(path, real) || !strcmp(seen, real))
			continue; /* the same file's next mapping */
		snprintf(seen, sizeof(seen), "%s", real);
		found++;
		if (strcmp(real, want)) {
			fprintf(stderr, "loaded %s, want %s\n", real, want);
			failures++;
		}
	}
	fclose(maps);
	if (found != 1)
		fprintf(stderr, "%d libfabric libraries mapped, want 1\n", found);
	CHECK(found == 1);
	printf("[%d] loaded %s\n", (int)getpid(), seen);
}

static struct fi_info *v2_hints(const char *prov)
{
	struct fi_info *hints = fi_allocinfo();

	if (!hints)
		return NULL;
	hints->caps = FI_MSG | FI_TAGGED;
	hints->ep_attr->type = FI_EP_RDM;
	/* 2.x: mr_mode bits only (FI_MR_BASIC/SCALABLE are deprecated), and
	 * the unified progress field. */
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
	                              FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->progress = FI_PROGRESS_MANUAL;
	hints->fabric_attr->prov_name = strdup(prov);
	return hints;
}

/* The 2.x receive capability bits: served when asked for; unasked, only
 * the secondary FI_TAGGED_MULTI_RECV (answer: hints FI_MSG | FI_TAGGED). */
static void check_new_caps(const char *prov, const struct fi_info *answer, int strict)
{
	static const struct {
		uint64_t bit;
		const char *name;
		int unasked;
	} caps[] = {
	    {FI_TAGGED_DIRECTED_RECV, "FI_TAGGED_DIRECTED_RECV", 0},
	    {FI_TAGGED_MULTI_RECV, "FI_TAGGED_MULTI_RECV", 1},
	    {FI_EXACT_DIRECTED_RECV, "FI_EXACT_DIRECTED_RECV", 0},
	};

	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		struct fi_info *hints = v2_hints(prov), *info = NULL;
		int ret;

		if (!hints) {
			failures++;
			return;
		}
		hints->caps |= caps[i].bit;
		ret = fi_getinfo(FI_VERSION(2, 0), NULL, NULL, 0, hints, &info);
		printf("%s %s: %s%s\n", prov, caps[i].name,
		       ret ? "not offered" : "offered",
		       answer->caps & caps[i].bit ? ", reported unasked" : "");
		if (strict) {
			CHECK(ret == 0);
			CHECK(info && (info->caps & caps[i].bit));
			CHECK(info && (info->rx_attr->caps & caps[i].bit));
			CHECK(!(answer->caps & caps[i].bit) == !caps[i].unasked);
			CHECK(!(answer->rx_attr->caps & caps[i].bit) == !caps[i].unasked);
		}
		fi_freeinfo(info);
		fi_freeinfo(hints);
	}
}

static int open_peer(struct peer *p, int rank)
{
	struct fi_info *hints = v2_hints(p->prov);
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .size = 64};
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE, .count = 4};
	char port[16];
	const char *node = NULL, *service = NULL;
	uint64_t flags = 0;

	if (!hints)
		return -1;
	if (!strcmp(p->prov, "tcp")) {
		snprintf(port, sizeof(port), "%d", p->port + rank);
		node = "127.0.0.1";
		service = port;
		flags = FI_SOURCE;
	}
	CHECK_RET(fi_getinfo(FI_VERSION(2, 0), node, service, flags, hints, &p->info));
	fi_freeinfo(hints);
	CHECK(p->info->fabric_attr->api_version == FI_VERSION(2, 0));
	CHECK(!strcmp(p->info->fabric_attr->prov_name, p->prov));
	CHECK((p->info->caps & (FI_MSG | FI_TAGGED)) == (FI_MSG | FI_TAGGED));
	CHECK(p->info->domain_attr->progress == p->info->domain_attr->data_progress);
	CHECK(p->info->domain_attr->progress != FI_PROGRESS_UNSPEC);
	/* A FABRIC_1.9 answer: the domain's counter limits are filled in. */
	CHECK(p->info->domain_attr->max_cntr_value != 0);

	CHECK_RET(fi_fabric2(p->info, &p->fabric, 0, NULL));
	CHECK(p->fabric->api_version == FI_VERSION(2, 0));
	CHECK_RET(fi_domain(p->fabric, p->info, &p->domain, NULL));
	CHECK_RET(fi_cq_open(p->domain, &cq_attr, &p->cq, NULL));
	CHECK_RET(fi_av_open(p->domain, &av_attr, &p->av, NULL));
	CHECK_RET(fi_endpoint(p->domain, p->info, &p->ep, NULL));
	CHECK_RET(fi_ep_bind(p->ep, &p->cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK_RET(fi_ep_bind(p->ep, &p->av->fid, 0));
	CHECK_RET(fi_enable(p->ep));
	return 0;
}

static void close_peer(struct peer *p)
{
	if (p->ep)
		CHECK(fi_close(&p->ep->fid) == 0);
	if (p->av)
		CHECK(fi_close(&p->av->fid) == 0);
	if (p->cq)
		CHECK(fi_close(&p->cq->fid) == 0);
	if (p->domain)
		CHECK(fi_close(&p->domain->fid) == 0);
	if (p->fabric)
		CHECK(fi_close(&p->fabric->fid) == 0);
	fi_freeinfo(p->info);
}

/* Address exchange over pipes: each side writes its name, reads the peer's. */
static int exchange(struct peer *p, int wfd, int rfd)
{
	char name[256], peer_name[256];
	size_t len = sizeof(name);
	uint32_t n;

	CHECK_RET(fi_getname(&p->ep->fid, name, &len));
	n = (uint32_t)len;
	if (write(wfd, &n, sizeof(n)) != sizeof(n) ||
	    write(wfd, name, len) != (ssize_t)len)
		return -1;
	if (read(rfd, &n, sizeof(n)) != sizeof(n) || n > sizeof(peer_name) ||
	    read(rfd, peer_name, n) != (ssize_t)n)
		return -1;
	if (fi_av_insert(p->av, peer_name, 1, &p->remote, 0, NULL) != 1) {
		fprintf(stderr, "fi_av_insert failed\n");
		return -1;
	}
	return 0;
}

static int wait_comp(struct peer *p, struct fi_cq_tagged_entry *out)
{
	time_t end = time(NULL) + 30;

	for (;;) {
		ssize_t n = fi_cq_read(p->cq, out, 1);

		if (n == 1)
			return 0;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};

			fi_cq_readerr(p->cq, &err, 0);
			fprintf(stderr,
			        "[%d] error completion (context %p, flags 0x%llx): %s\n",
			        (int)getpid(), err.op_context,
			        (unsigned long long)err.flags, fi_strerror(err.err));
			failures++;
			return -1;
		}
		if (n != -FI_EAGAIN) {
			fprintf(stderr, "fi_cq_read: %zd\n", n);
			failures++;
			return -1;
		}
		if (time(NULL) > end) {
			fprintf(stderr, "[%d] no completion in 30 s\n", (int)getpid());
			failures++;
			return -1;
		}
	}
}

#define POST(call)                                                                       \
	do {                                                                             \
		ssize_t post_;                                                           \
		while ((post_ = (call)) == -FI_EAGAIN)                                   \
			fi_cq_read(p->cq, NULL, 0);                                      \
		CHECK_RET((int)post_);                                                   \
	} while (0)

/* Rank 1: a message, a tagged message for the exact tag, one for the
 * ignore mask; then waits for rank 0's acknowledgement. */
static int sender(struct peer *p)
{
	struct fi_cq_tagged_entry comp;
	char msg[] = MSG_TEXT;
	uint64_t t1 = 0x1111222233334444ULL, t2 = 0x5555666677778888ULL, ack = 0;
	int ctx[4];

	POST(fi_send(p->ep, msg, sizeof(msg), NULL, p->remote, &ctx[0]));
	POST(fi_tsend(p->ep, &t1, sizeof(t1), NULL, p->remote, TAG_EXACT, &ctx[1]));
	POST(fi_tsend(p->ep, &t2, sizeof(t2), NULL, p->remote, TAG_IGNORED, &ctx[2]));
	POST(fi_recv(p->ep, &ack, sizeof(ack), NULL, p->remote, &ctx[3]));
	for (int i = 0; i < 4; i++) {
		if (wait_comp(p, &comp))
			return -1;
		CHECK(comp.op_context == &ctx[0] || comp.op_context == &ctx[1] ||
		      comp.op_context == &ctx[2] || comp.op_context == &ctx[3]);
	}
	CHECK(ack == 0xacULL);
	return 0;
}

static int receiver(struct peer *p)
{
	struct fi_cq_tagged_entry comp;
	char msg[64] = "";
	uint64_t t1 = 0, t2 = 0, ack = 0xacULL;
	int ctx[4], got = 0;

	/* The ignore-bits receive first: it must not take the exact-tag one. */
	POST(fi_trecv(p->ep, &t2, sizeof(t2), NULL, p->remote, 0x500, 0xff, &ctx[2]));
	POST(fi_trecv(p->ep, &t1, sizeof(t1), NULL, p->remote, TAG_EXACT, 0, &ctx[1]));
	POST(fi_recv(p->ep, msg, sizeof(msg), NULL, p->remote, &ctx[0]));
	while (got != 7) {
		if (wait_comp(p, &comp))
			return -1;
		if (comp.op_context == &ctx[0]) {
			CHECK(comp.flags & FI_RECV);
			CHECK(comp.flags & FI_MSG);
			CHECK(comp.len == sizeof(MSG_TEXT));
			CHECK(!strcmp(msg, MSG_TEXT));
			got |= 1;
		} else if (comp.op_context == &ctx[1]) {
			CHECK((comp.flags & (FI_RECV | FI_TAGGED)) ==
			      (FI_RECV | FI_TAGGED));
			CHECK(comp.tag == TAG_EXACT);
			CHECK(t1 == 0x1111222233334444ULL);
			got |= 2;
		} else if (comp.op_context == &ctx[2]) {
			CHECK((comp.flags & (FI_RECV | FI_TAGGED)) ==
			      (FI_RECV | FI_TAGGED));
			CHECK(comp.tag == TAG_IGNORED);
			CHECK(t2 == 0x5555666677778888ULL);
			got |= 4;
		} else {
			fprintf(stderr, "unexpected completion context %p\n",
			        comp.op_context);
			failures++;
			return -1;
		}
	}
	POST(fi_send(p->ep, &ack, sizeof(ack), NULL, p->remote, &ctx[3]));
	if (wait_comp(p, &comp))
		return -1;
	CHECK(comp.op_context == &ctx[3]);
	return 0;
}

/* The receiver closes the moment its last receive completes: the
 * sender's send that carried it completes all the same. */
static int run(struct peer *p, int rank, int wfd, int rfd)
{
	if (open_peer(p, rank) || exchange(p, wfd, rfd))
		return -1;
	return rank ? sender(p) : receiver(p);
}

int main(int argc, char **argv)
{
	struct peer p = {0};
	int to_child[2], to_parent[2], status = 0, strict;
	struct fi_info *hints, *answer = NULL;
	pid_t pid;

	if (argc != 5) {
		fprintf(stderr, "usage: %s <provider> <port> <lib dir> <loom|ref>\n",
		        argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	p.prov = argv[1];
	p.port = atoi(argv[2]);
	strict = !strcmp(argv[4], "loom");
	alarm(90);
	check_loaded(argv[3]);
	printf("fi_version() = %u.%u, headers %d.%d\n", FI_MAJOR(fi_version()),
	       FI_MINOR(fi_version()), FI_MAJOR_VERSION, FI_MINOR_VERSION);

	hints = v2_hints(p.prov);
	if (!hints || fi_getinfo(FI_VERSION(2, 0), NULL, NULL, 0, hints, &answer)) {
		fprintf(stderr, "fi_getinfo(2.0) for %s found nothing\n", p.prov);
		return 1;
	}
	check_new_caps(p.prov, answer, strict);
	fi_freeinfo(answer);
	fi_freeinfo(hints);
	CHECK(fi_fabric2(NULL, &p.fabric, 0, NULL) == -FI_EINVAL);

	if (pipe(to_child) || pipe(to_parent))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		close(to_child[1]);
		close(to_parent[0]);
		run(&p, 1, to_parent[1], to_child[0]);
		close_peer(&p);
		_exit(failures ? 1 : 0);
	}
	close(to_child[0]);
	close(to_parent[1]);
	if (run(&p, 0, to_child[1], to_parent[0]))
		kill(pid, SIGTERM);
	close_peer(&p);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		fprintf(stderr, "sender failed (status 0x%x)\n", status);
		failures++;
	}
	printf("%s: %s\n", p.prov, failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
