/* cli.h: what `fusc run` (tools/run.c) and `fusc check` (tools/check.c) share: the options
 * FILE, --fusion, --dims, --color and --seed, their usage errors, the sizes of a fusion checked
 * against the file, the seeded random inputs and the comparison with the reference.
 * Options are parsed by getopt_long (GNU style: --opt=X and --opt X, "--" ends the options,
 * operands anywhere). Every message starts with the subcommand's name ("fusc run: ...");
 * usage errors exit 2.
 */
#ifndef FUSC_TOOLS_CLI_H
#define FUSC_TOOLS_CLI_H

#include <stdio.h>

#include "interp/interp.h"

/* One NAME=VALUE of --dims; used is set once a selected fusion has a size of that name. */
typedef struct CliDim {
	char *name;
	int64_t value;
	bool used;
} CliDim;

typedef struct CliOpts CliOpts;

/* One subcommand: its name, its usage text and the options only it takes. */
typedef struct CliCommand {
	const char *name;		 /* "fusc run": the prefix of every message */
	void (*usage)(FILE *out);
	const char *const *flags;	 /* options without a value, NULL-terminated, "--name" */
	const char *const *valued;	 /* options with a value besides --fusion, --dims, --color */
	/* Takes one of flags (val NULL) or valued; -1 to go on, else an exit status. */
	int (*option)(CliOpts *o, const char *name, const char *val);
} CliCommand;

struct CliOpts {
	const CliCommand *cmd;
	const char *file;
	const char *fusion;
	CliDim dims[64];
	int ndims;
	uint64_t seed;
	DiagColor color;
};

/* Prints "NAME: " fmt (with arg) on stderr; returns 2. */
int cli_usage_error(const CliOpts *o, const char *fmt, const char *arg);
bool cli_parse_int(const char *s, int64_t *out);
/* Parses argv into o (o->cmd set by the caller); -1 to go on, else an exit status. */
int cli_parse_args(CliOpts *o, int argc, char **argv);
/* The message for getopt_long's '?' or ':' (its opterr off), as "PROG: unknown option 'X'",
 * "PROG: option 'X' needs a value" or "PROG: option 'X' takes no value"; returns 2. */
int cli_option_error(const char *prog, int ch, char **argv);
/* Turns d's colour on or off for --color=when, from NO_COLOR, TERM and whether stderr is a
 * terminal. */
void cli_diag_color(Diag *d, DiagColor when);
void cli_free(CliOpts *o);
/* The whole file (or stdin for "-"), NUL-terminated, malloc'd; NULL with errno on error. */
char *cli_read_file(const char *path, size_t *len);

/* "no fusion named 'X' in FILE (it has: a b)"; returns 2. */
int cli_no_fusion(const CliOpts *o, Program *p);
/* The --dims entry of that name, marked used; NULL if none. */
CliDim *cli_dim(CliOpts *o, const char *name);
/* Checks sizes against f's shapes ("dims contradict"); an exit status on error, else -1. */
int cli_check_sizes(const CliOpts *o, Fusion *f, const int64_t *sizes);
/* "unknown dimension" for a --dims entry no selected fusion used; an exit status, else -1. */
int cli_unused_dims(const CliOpts *o);

/* Seeded random data, the same for `fusc run` and `fusc check`. */
double cli_random_scalar(const CliOpts *o, Fusion *f, int i);
void cli_fill_input(const CliOpts *o, HostTensor *h, int i);

/* Tolerances by dtype, widened by the square root of the reduction terms. */
typedef struct CliTol {
	double atol, rtol;
} CliTol;

CliTol cli_tolerance(Tensor *t, const int64_t *sizes);
/* Compares got (called what: "gpu", "simulated") with ref and prints its lines to out (NULL:
 * nothing printed); only the elements written[] marks count (NULL: all), and with all_blocks
 * every one must be written. True when it matches. */
bool cli_compare(Tensor *t, const HostTensor *got, const HostTensor *ref, CliTol tol,
		 const char *what, const unsigned char *written, bool all_blocks, FILE *out);

#endif
