/* output.h: every file fusc writes goes through tools/output.c (docs/cli.md: a failed compilation
 * leaves no partial output; an output path equal to the input is refused).
 *
 * Outputs are written all or nothing: each to a temporary beside its path, created with
 * O_CREAT|O_EXCL|O_NOFOLLOW (a file or symlink planted under the temporary's name is neither
 * followed nor overwritten: another name is tried), and renamed over the paths only once every
 * temporary was written and closed without error. "-" is standard output; a path that exists
 * and is not a regular file (/dev/null, a pipe, a terminal) is written in place, since renaming
 * over it would replace it. Messages are "fusc: cannot write 'PATH': reason" on stderr.
 */
#ifndef FUSC_TOOLS_OUTPUT_H
#define FUSC_TOOLS_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct OutputFile {
	const char *path; /* "-": standard output */
	const char *data;
	size_t len;
} OutputFile;

/* Writes the n files, all or nothing. False after a message: then no temporary remains and no
 * path was replaced (except when a rename itself fails after others succeeded: the files
 * already renamed are removed again, so no partial set of outputs is left). */
bool output_write(const OutputFile *files, int n);

/* True (after a message) when writing `out` would overwrite the input file `in`: the same
 * path, or an existing file with the same device and inode (another spelling, a hard link, a
 * symlink to it). "-" on either side is never the same file. */
bool output_is_input(const char *out, const char *in);

#endif
