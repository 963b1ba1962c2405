/* output.c: writing fusc's outputs all or nothing, safely (tools/output.h).
 *
 * Two phases. First every output that goes to a regular file (or to a path that does not exist
 * yet) is written to a temporary of its own beside it; nothing the user can see has changed, so
 * any failure just removes the temporaries. Then the outputs that cannot be renamed into place
 * (standard output, /dev/null, a pipe) are written, and the temporaries are renamed over their
 * paths. A temporary is created with O_EXCL and O_NOFOLLOW under a name derived from the path
 * and the process id, so a file or a symlink that someone planted under that name makes the
 * open fail (EEXIST) instead of being followed; the next name is tried, and the planted entry
 * is left alone (it is not ours to remove).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/support.h"
#include "tools/output.h"

enum { OUTPUT_TEMP_TRIES = 100 }; /* PATH.tmpPID, then PATH.tmpPID.1 ... */

typedef struct Pending {
	const OutputFile *f;
	char *tmp;     /* the temporary (malloc'd); NULL: written in place */
	bool renamed;  /* tmp is now f->path */
} Pending;

static bool cannot(const char *path, int err)
{
	fprintf(stderr, "fusc: cannot write '%s': %s\n", path, strerror(err));
	return false;
}

/* Writes all of data to fd; false with errno. */
static bool write_all(int fd, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, data, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			return false;
		}
		data += n;
		len -= (size_t)n;
	}
	return true;
}

/* A new temporary beside path, opened for writing; its name in *tmp (malloc'd). -1 with errno
 * when none could be created. */
static int open_temp(const char *path, char **tmp)
{
	size_t cap = strlen(path) + 48;
	char *name = xmalloc(cap);
	int e = EEXIST;

	for (int k = 0; k < OUTPUT_TEMP_TRIES && e == EEXIST; k++) {
		if (k == 0)
			snprintf(name, cap, "%s.tmp%ld", path, (long)getpid());
		else
			snprintf(name, cap, "%s.tmp%ld.%d", path, (long)getpid(), k);
		int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
		if (fd >= 0) {
			*tmp = name;
			return fd;
		}
		e = errno;
	}
	free(name);
	errno = e;
	return -1;
}

/* Phase one for a regular file: the data in a complete, closed temporary (p->tmp). */
static bool write_temp(Pending *p)
{
	int fd = open_temp(p->f->path, &p->tmp);
	if (fd < 0)
		return cannot(p->f->path, errno);
	bool ok = write_all(fd, p->f->data, p->f->len);
	int e = errno;
	if (close(fd) != 0 && ok) {
		ok = false;
		e = errno;
	}
	if (ok)
		return true;
	unlink(p->tmp);
	free(p->tmp);
	p->tmp = NULL;
	return cannot(p->f->path, e);
}

/* Standard output, or an existing file that is not a regular one (no O_CREAT, no O_TRUNC:
 * if the path was replaced by a regular file since it was looked at, nothing is truncated and
 * the write is refused). */
static bool write_in_place(const OutputFile *f)
{
	if (strcmp(f->path, "-") == 0) {
		if (fwrite(f->data, 1, f->len, stdout) == f->len && fflush(stdout) == 0)
			return true;
		return cannot("<stdout>", errno);
	}
	int fd = open(f->path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return cannot(f->path, errno);
	struct stat st;
	bool ok = fstat(fd, &st) == 0 && !S_ISREG(st.st_mode);
	int e = ok ? 0 : EEXIST;
	if (ok && !write_all(fd, f->data, f->len)) {
		ok = false;
		e = errno;
	}
	if (close(fd) != 0 && ok) {
		ok = false;
		e = errno;
	}
	return ok || cannot(f->path, e);
}

/* Removes what a failed output_write made: temporaries, and outputs already renamed. */
static void undo(Pending *ps, int n)
{
	for (int i = 0; i < n; i++) {
		if (ps[i].renamed)
			unlink(ps[i].f->path);
		else if (ps[i].tmp)
			unlink(ps[i].tmp);
	}
}

bool output_write(const OutputFile *files, int n)
{
	Pending *ps = calloc((size_t)(n > 0 ? n : 1), sizeof *ps);
	bool ok = true;

	for (int i = 0; i < n && ok; i++) {
		const OutputFile *f = &files[i];
		struct stat st;
		ps[i].f = f;
		if (strcmp(f->path, "-") == 0)
			continue;
		if (stat(f->path, &st) == 0 && S_ISDIR(st.st_mode))
			ok = cannot(f->path, EISDIR);
		else if (stat(f->path, &st) != 0 || S_ISREG(st.st_mode))
			ok = write_temp(&ps[i]);
	}
	for (int i = 0; i < n && ok; i++)
		if (!ps[i].tmp)
			ok = write_in_place(ps[i].f);
	for (int i = 0; i < n && ok; i++) {
		if (!ps[i].tmp)
			continue;
		if (rename(ps[i].tmp, ps[i].f->path) == 0)
			ps[i].renamed = true;
		else
			ok = cannot(ps[i].f->path, errno);
	}
	if (!ok)
		undo(ps, n);
	for (int i = 0; i < n; i++)
		free(ps[i].tmp);
	free(ps);
	return ok;
}

bool output_is_input(const char *out, const char *in)
{
	struct stat so, si;

	if (strcmp(out, "-") == 0 || strcmp(in, "-") == 0)
		return false;
	if (strcmp(out, in) != 0 &&
	    (stat(out, &so) != 0 || stat(in, &si) != 0 || so.st_dev != si.st_dev ||
	     so.st_ino != si.st_ino))
		return false;
	fprintf(stderr, "fusc: the output '%s' is the input file '%s': refusing to overwrite it\n",
		out, in);
	return true;
}
