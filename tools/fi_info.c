/* fi_info: query the libfabric in use for interfaces, providers and tunables.
 * Only the public API is used, so the tool runs on any libfabric.so.1. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strcasestr */
#endif
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <rdma/fabric.h>
#include "v1_names.h"

/* The version of these tools, not of the library they run on: the API
 * they are built for, as libfabric's tools of that version print it. */
#define FI_INFO_STR_(x) #x
#define FI_INFO_STR(x)  FI_INFO_STR_(x)
#define LOOM_TOOLS_VERSION                                                               \
	FI_INFO_STR(FI_MAJOR_VERSION) "." FI_INFO_STR(FI_MINOR_VERSION) "." FI_INFO_STR(  \
	    FI_REVISION_VERSION)

/* getopt_long() value for the options that have no single-letter form. */
enum { OPT_VERSION = 0x100 };

struct name_value {
	const char *name;
	uint64_t value;
};

/* Names accepted by -c; other capability bits are deliberately not selectable
 * from the command line, mirroring the reference tool. */
static const struct name_value cap_names[] = {
    {"FI_MSG", FI_MSG},
    {"FI_RMA", FI_RMA},
    {"FI_TAGGED", FI_TAGGED},
    {"FI_ATOMIC", FI_ATOMIC},
    {"FI_MULTICAST", FI_MULTICAST},
    {"FI_COLLECTIVE", FI_COLLECTIVE},
    {"FI_READ", FI_READ},
    {"FI_WRITE", FI_WRITE},
    {"FI_RECV", FI_RECV},
    {"FI_SEND", FI_SEND},
    {"FI_REMOTE_READ", FI_REMOTE_READ},
    {"FI_REMOTE_WRITE", FI_REMOTE_WRITE},
    {"FI_MULTI_RECV", FI_MULTI_RECV},
    {"FI_REMOTE_CQ_DATA", FI_REMOTE_CQ_DATA},
    {"FI_MORE", FI_MORE},
    {"FI_PEEK", FI_PEEK},
    {"FI_TRIGGER", FI_TRIGGER},
    {"FI_FENCE", FI_FENCE},
    {"FI_SOURCE_ERR", FI_SOURCE_ERR},
    {"FI_LOCAL_COMM", FI_LOCAL_COMM},
    {"FI_REMOTE_COMM", FI_REMOTE_COMM},
    {"FI_SHARED_AV", FI_SHARED_AV},
    {"FI_RMA_EVENT", FI_RMA_EVENT},
    {"FI_SOURCE", FI_SOURCE},
    {"FI_NAMED_RX_CTX", FI_NAMED_RX_CTX},
    {"FI_DIRECTED_RECV", FI_DIRECTED_RECV},
    {"FI_HMEM", FI_HMEM},
    {NULL, 0},
};

static const struct name_value mode_names[] = {
    {"FI_CONTEXT", FI_CONTEXT},
    {"FI_MSG_PREFIX", FI_MSG_PREFIX},
    {"FI_ASYNC_IOV", FI_ASYNC_IOV},
    {"FI_RX_CQ_DATA", FI_RX_CQ_DATA},
    {"FI_LOCAL_MR", LM_LOCAL_MR},
    {"FI_NOTIFY_FLAGS_ONLY", FI_NOTIFY_FLAGS_ONLY},
    {"FI_RESTRICTED_COMP", FI_RESTRICTED_COMP},
    {"FI_CONTEXT2", FI_CONTEXT2},
    {NULL, 0},
};

static const struct name_value ep_type_names[] = {
    {"FI_EP_UNSPEC", FI_EP_UNSPEC},
    {"FI_EP_MSG", FI_EP_MSG},
    {"FI_EP_DGRAM", FI_EP_DGRAM},
    {"FI_EP_RDM", FI_EP_RDM},
    {"FI_EP_SOCK_STREAM", FI_EP_SOCK_STREAM},
    {"FI_EP_SOCK_DGRAM", FI_EP_SOCK_DGRAM},
    {NULL, 0},
};

static const struct name_value addr_format_names[] = {
    {"FI_FORMAT_UNSPEC", FI_FORMAT_UNSPEC},
    {"FI_SOCKADDR", FI_SOCKADDR},
    {"FI_SOCKADDR_IN", FI_SOCKADDR_IN},
    {"FI_SOCKADDR_IN6", FI_SOCKADDR_IN6},
    {"FI_SOCKADDR_IB", FI_SOCKADDR_IB},
    {"FI_ADDR_PSMX", FI_ADDR_PSMX},
    {"FI_ADDR_GNI", FI_ADDR_GNI},
    {"FI_ADDR_BGQ", FI_ADDR_BGQ},
    {"FI_ADDR_MLX", FI_ADDR_MLX},
    {"FI_ADDR_STR", FI_ADDR_STR},
    {"FI_ADDR_PSMX2", FI_ADDR_PSMX2},
    {"FI_ADDR_EFA", FI_ADDR_EFA},
    {NULL, 0},
};

/* One row per option; it drives both getopt_long() and the help text, so the
 * two cannot drift apart. The help column carries its own leading tabs
 * because the reference aligns each line by hand. */
struct option_desc {
	const char *long_name;
	int short_name;  /* 0: long form only */
	const char *arg; /* NULL: takes no argument */
	const char *help;
};

static const struct option_desc option_descs[] = {
    {"help", 'h', NULL, "\t\tdisplay this help and exit"},
    {"src_addr", 's', "ADDR", "\t\tsource name or address"},
    {"node", 'n', "NAME", "\t\tdest node name or address"},
    {"port", 'P', "PNUM", "\t\tport number"},
    {"caps", 'c', "CAP1|CAP2..", "\tone or more capabilities: FI_MSG|FI_RMA..."},
    {"mode", 'm', "MOD1|MOD2..", "\tone or more modes, default all modes"},
    {"ep_type", 't', "EPTYPE",
     "\t\tspecify single endpoint type: FI_EP_MSG, FI_EP_DGRAM..."},
    {"domain", 'd', "DOMAIN", "\t\tspecify the domain name"},
    {"fabric", 'f', "FABRIC", "\t\tspecify the fabric name"},
    {"addr_format", 'a', "FMT",
     "\t\tspecify accepted address format: FI_FORMAT_UNSPEC, FI_SOCKADDR..."},
    {"provider", 'p', "PROV", "\t\tspecify provider explicitly"},
    {"env", 'e', NULL, "\t\tprint libfabric environment variables"},
    {"getenv", 'g', "SUBSTR", "\t\tprint libfabric environment variables with substr"},
    {"info", 'i', "", "\t\tprint fi_info structures containing substr"},
    {"list", 'l', NULL, "\t\tlist available libfabric providers"},
    {"verbose", 'v', NULL, "\t\tverbose output"},
    {"version", 0, NULL, "\t\tprint version info and exit"},
};

#define N_OPTIONS (sizeof(option_descs) / sizeof(option_descs[0]))

/* What the command line asked for, gathered before any library call. */
struct request {
	struct fi_info *hints;
	const char *node;
	const char *service;
	uint64_t flags;
	const char *filter; /* -g and -i share it, as in the reference */
	int use_hints;      /* set by any filter on the fi_info fields */
	int env;
	int list;
	int verbose;
};

static void usage(const char *prog)
{
	size_t i;

	printf("Usage: %s\n", prog);
	for (i = 0; i < N_OPTIONS; i++) {
		const struct option_desc *d = &option_descs[i];

		if (!d->short_name)
			printf("  --%s\t%s\n", d->long_name, d->help);
		else if (d->arg)
			printf("  -%c, --%s=%s%s\n", d->short_name, d->long_name, d->arg,
			       d->help);
		else
			printf("  -%c, --%s\t%s\n", d->short_name, d->long_name, d->help);
	}
}

/* Builds the getopt_long() tables from option_descs. */
static void build_getopt_tables(struct option *longopts, char *shortopts)
{
	size_t i;
	char *s = shortopts;

	for (i = 0; i < N_OPTIONS; i++) {
		const struct option_desc *d = &option_descs[i];

		longopts[i].name = d->long_name;
		longopts[i].has_arg = d->arg ? required_argument : no_argument;
		longopts[i].flag = NULL;
		longopts[i].val = d->short_name ? d->short_name : OPT_VERSION;
		if (d->short_name) {
			*s++ = (char)d->short_name;
			if (d->arg)
				*s++ = ':';
		}
	}
	*s = '\0';
	memset(&longopts[N_OPTIONS], 0, sizeof(longopts[N_OPTIONS]));
}

static const struct name_value *lookup(const struct name_value *table, const char *name)
{
	for (; table->name; table++) {
		if (!strcasecmp(table->name, name))
			return table;
	}
	return NULL;
}

/* ORs every '|'-separated name of list into *bits; empty names are skipped.
 * Returns the first unknown name (inside the caller's copy) or NULL. */
static const char *parse_bits(const struct name_value *table, char *list, uint64_t *bits)
{
	char *save = NULL;
	char *tok;

	for (tok = strtok_r(list, "|", &save); tok; tok = strtok_r(NULL, "|", &save)) {
		const struct name_value *nv = lookup(table, tok);

		if (!nv)
			return tok;
		*bits |= nv->value;
	}
	return NULL;
}

static int parse_bit_option(const struct name_value *table, const char *arg,
                            uint64_t *bits, const char *what)
{
	const char *bad;
	char *copy = strdup(arg);

	if (!copy) {
		fprintf(stderr, "error: %s\n", strerror(errno));
		return ENOMEM;
	}
	bad = parse_bits(table, copy, bits);
	if (bad)
		fprintf(stderr, "error: Unrecognized %s: %s\n", what, bad);
	free(copy);
	return bad ? FI_EINVAL : 0;
}

static int parse_one(const struct name_value *table, const char *arg, uint64_t *value,
                     const char *what)
{
	const struct name_value *nv = lookup(table, arg);

	if (!nv) {
		fprintf(stderr, "error: Unrecognized %s: %s\n", what, arg);
		return FI_EINVAL;
	}
	*value = nv->value;
	return 0;
}

/* Replaces an owned string field of the hints; fi_freeinfo() releases it. */
static int set_string(char **field, const char *value)
{
	char *copy = strdup(value);

	if (!copy)
		return ENOMEM;
	free(*field);
	*field = copy;
	return 0;
}

static void print_version(const char *prog)
{
	uint32_t v = fi_version();
	const char *lib = fi_tostr(&v, FI_TYPE_VERSION);

	printf("%s: %s\n", prog, LOOM_TOOLS_VERSION);
	/* The library's own version string names the implementation that is
	 * actually loaded; fall back to fi_version() if it has none. */
	if (lib && lib[0] >= '0' && lib[0] <= '9')
		printf("libfabric: %s\n", lib);
	else
		printf("libfabric: %u.%u.0\n", FI_MAJOR(v), FI_MINOR(v));
	printf("libfabric api: %d.%d\n", FI_MAJOR_VERSION, FI_MINOR_VERSION);
}

/* The reference passes no hints at all unless one of these options was given,
 * and providers answer NULL hints differently from default ones. */
static int is_hint_option(int opt)
{
	switch (opt) {
	case 'c':
	case 'm':
	case 't':
	case 'a':
	case 'p':
	case 'd':
	case 'f':
		return 1;
	default:
		return 0;
	}
}

/* Applies one parsed option. Returns -1 to go on, otherwise the exit code. */
static int apply_option(struct request *req, int opt, const char *arg, const char *prog)
{
	struct fi_info *h = req->hints;
	uint64_t v;
	int ret = 0;

	if (is_hint_option(opt))
		req->use_hints = 1;

	switch (opt) {
	case 's':
		req->flags |= FI_SOURCE;
		req->node = arg;
		break;
	case 'n':
		req->node = arg;
		break;
	case 'P':
		req->service = arg;
		break;
	case 'c':
		ret = parse_bit_option(cap_names, arg, &h->caps, "capability");
		break;
	case 'm':
		/* Unlike -c, each -m starts again from no mode bits. */
		h->mode = 0;
		ret = parse_bit_option(mode_names, arg, &h->mode, "mode");
		break;
	case 't':
		ret = parse_one(ep_type_names, arg, &v, "endpoint type");
		if (!ret)
			h->ep_attr->type = (enum fi_ep_type)v;
		break;
	case 'a':
		ret = parse_one(addr_format_names, arg, &v, "address format");
		if (!ret)
			h->addr_format = (uint32_t)v;
		break;
	case 'p':
		ret = set_string(&h->fabric_attr->prov_name, arg);
		break;
	case 'd':
		ret = set_string(&h->domain_attr->name, arg);
		break;
	case 'f':
		ret = set_string(&h->fabric_attr->name, arg);
		break;
	case 'g':
		req->filter = arg;
		req->env = 1;
		break;
	case 'e':
		req->env = 1;
		break;
	case 'i':
		req->filter = arg;
		req->verbose = 1;
		break;
	case 'l':
		req->list = 1;
		break;
	case 'v':
		req->verbose = 1;
		break;
	case OPT_VERSION:
		print_version(prog);
		return 0;
	default: /* 'h' and anything getopt rejected */
		usage(prog);
		return 1;
	}
	return ret ? ret : -1;
}

static const char *param_type_name(enum fi_param_type type)
{
	switch (type) {
	case FI_PARAM_STRING:
		return "String";
	case FI_PARAM_INT:
		return "Integer";
	case FI_PARAM_BOOL:
		return "Boolean (0/1, on/off, true/false, yes/no)";
	case FI_PARAM_SIZE_T:
		return "size_t";
	}
	return "Unknown";
}

static int print_params(const char *filter)
{
	struct fi_param *params = NULL;
	int count = 0;
	int i;
	int ret;

	ret = fi_getparams(&params, &count);
	if (ret)
		return -ret;

	for (i = 0; i < count; i++) {
		const struct fi_param *p = &params[i];

		if (filter && !strcasestr(p->name, filter))
			continue;
		printf("# %s: %s\n", p->name, param_type_name(p->type));
		printf("# %s\n", p->help_string);
		/* The reference brackets the value with NUL bytes; keep them so
		 * the outputs of both tools compare equal byte for byte. */
		if (p->value) {
			printf("%s=", p->name);
			putchar('\0');
			fputs(p->value, stdout);
			putchar('\0');
			putchar('\n');
		}
		putchar('\n');
	}
	fi_freeparams(params);
	return 0;
}

static void print_summary(const struct fi_info *info)
{
	/* fi_tostr() returns one static buffer, so call it once per printf. */
	printf("provider: %s\n", info->fabric_attr->prov_name);
	printf("    fabric: %s\n", info->fabric_attr->name);
	printf("    domain: %s\n", info->domain_attr->name);
	printf("    version: %d.%d\n", FI_MAJOR(info->fabric_attr->prov_version),
	       FI_MINOR(info->fabric_attr->prov_version));
	printf("    type: %s\n", fi_tostr(&info->ep_attr->type, FI_TYPE_EP_TYPE));
	printf("    protocol: %s\n",
	       fi_tostr(&info->ep_attr->protocol, FI_TYPE_PROTOCOL));
}

static void print_infos(const struct request *req, const struct fi_info *info)
{
	for (; info; info = info->next) {
		if (req->verbose) {
			const char *dump = fi_tostr(info, FI_TYPE_INFO);

			if (req->filter && !strcasestr(dump, req->filter))
				continue;
			printf("---\n%s", dump);
		} else if (req->list) {
			printf("%s:\n", info->fabric_attr->prov_name);
			printf("    version: %d.%d\n",
			       FI_MAJOR(info->fabric_attr->prov_version),
			       FI_MINOR(info->fabric_attr->prov_version));
		} else {
			print_summary(info);
		}
	}
}

/* The reference tool queries providers first even for -e, and reports a
 * failed query instead of the parameters; so does this one. */
static int run_getinfo(const struct request *req)
{
	struct fi_info *info = NULL;
	uint64_t flags = req->flags;
	int ret;

	if (req->list)
		flags |= FI_PROV_ATTR_ONLY;
	ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), req->node,
	                 req->service, flags, req->use_hints ? req->hints : NULL, &info);
	if (ret) {
		fprintf(stderr, "fi_getinfo: %d (%s)\n", ret, fi_strerror(-ret));
		return -ret;
	}
	if (req->env)
		ret = print_params(req->filter);
	else
		print_infos(req, info);
	fi_freeinfo(info);
	return ret;
}

int main(int argc, char **argv)
{
	struct option longopts[N_OPTIONS + 1];
	char shortopts[2 * N_OPTIONS + 1];
	struct request req;
	int opt;
	int ret = -1;

	memset(&req, 0, sizeof(req));
	req.hints = fi_allocinfo();
	if (!req.hints) {
		fprintf(stderr, "%s: out of memory\n", argv[0]);
		return ENOMEM;
	}
	/* Accept every mode by default: the tool wants to see all interfaces,
	 * not only those that need nothing from an application. */
	req.hints->mode = ~0ULL;
	req.hints->domain_attr->mode = ~0ULL;
	req.hints->domain_attr->mr_mode = ~(LM_MR_BASIC | LM_MR_SCALABLE);

	build_getopt_tables(longopts, shortopts);
	while (ret < 0 &&
	       (opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1)
		ret = apply_option(&req, opt, optarg, argv[0]);

	if (ret < 0)
		ret = run_getinfo(&req);

	fi_freeinfo(req.hints);
	return ret;
}
