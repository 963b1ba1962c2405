/* binary_cache.c: the on-disk cache of compiled binaries (runtime.h, docs/runtime.md).
 *
 * libfusrt loads what it finds here into the GPU, so the cache is trusted only as far as the
 * folder is: the folder is created 0700 (its missing parents too), and an existing one is
 * used only when it is a directory owned by this user that neither group nor others can
 * write. Everything inside is then opened relative to that one open folder (openat), so the
 * checked folder is the one used. An entry is loaded only when it is a regular file (not a
 * symlink) owned by this user, not writable by group or others, and its header matches:
 *     char          magic[8]    "FUSCBIN2"
 *     unsigned char key[32]     the key it was stored under (guards against renamed files)
 *     uint64_t      len         payload bytes (host order: the cache is per machine)
 *     unsigned char digest[32]  SHA-256 of the payload
 *     payload
 * The key is SHA-256 of the fusc version, the NVRTC version, the arch, the options and the
 * generated source. Stores write a temporary created with O_EXCL|O_NOFOLLOW, mode 0600, and
 * rename it over KEY.cubin (atomic: readers see the old entry or the new one).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "runtime/runtime.h"

#define CACHE_MAGIC "FUSCBIN2"
#define CACHE_MAX (1ull << 31) /* a larger payload is surely corrupt */

typedef struct CacheHeader {
	char magic[8];
	unsigned char key[SHA256_BYTES];
	uint64_t len;
	unsigned char digest[SHA256_BYTES];
} CacheHeader;

static void set(char **out, char *s)
{
	if (out)
		*out = s;
	else
		free(s);
}

/* A field of the key: its length, then its bytes (so no two field lists hash alike). */
static void key_field(Sha256 *s, const void *data, size_t n)
{
	uint64_t len = n;

	sha256_update(s, &len, sizeof len);
	sha256_update(s, data, n);
}

RtCacheKey rt_cache_key(const char *source, const char *options, int arch)
{
	Sha256 s;
	RtCacheKey k;
	int nvrtc[2] = {0, 0};

	nvrtc_version(&nvrtc[0], &nvrtc[1]);
	sha256_init(&s);
	key_field(&s, "fusc " FUSC_VERSION, strlen("fusc " FUSC_VERSION));
	key_field(&s, nvrtc, sizeof nvrtc);
	key_field(&s, &arch, sizeof arch);
	key_field(&s, options ? options : "", strlen(options ? options : ""));
	key_field(&s, source ? source : "", strlen(source ? source : ""));
	sha256_final(&s, k.b);
	return k;
}

char *rt_cache_default_dir(void)
{
	const char *s;
	Buf b = {0};

	if ((s = getenv("FUSRT_NO_CACHE")) && *s && strcmp(s, "0") != 0)
		return NULL;
	if ((s = getenv("FUSRT_CACHE_DIR")) && *s)
		return xstrdup(s);
	if ((s = getenv("XDG_CACHE_HOME")) && *s)
		buf_printf(&b, "%s/fusc", s);
	else if ((s = getenv("HOME")) && *s)
		buf_printf(&b, "%s/.cache/fusc", s);
	return b.s;
}

/* "KEY.cubin" (malloc'd) */
static char *entry_name(RtCacheKey key)
{
	char hex[2 * SHA256_BYTES + 1];

	sha256_hex(key.b, hex);
	return xprintf("%s.cubin", hex);
}

char *rt_cache_path(const char *dir, RtCacheKey key)
{
	char *name = entry_name(key), *path = xprintf("%s/%s", dir, name);

	free(name);
	return path;
}

/* Why st (of `what`) is not ours alone, or NULL. */
static char *not_private(const struct stat *st, const char *what)
{
	if (st->st_uid != geteuid())
		return xprintf("%s is owned by uid %u, not by this user (uid %u)", what,
			       (unsigned)st->st_uid, (unsigned)geteuid());
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return xprintf("%s is writable by group or others (mode %04o)", what,
			       (unsigned)(st->st_mode & 07777));
	return NULL;
}

bool rt_make_dirs(const char *dir, char **err)
{
	char *p = xstrdup(dir);

	for (char *s = p + 1;; s++) {
		bool end = *s == 0;
		if (*s == '/' || end) {
			*s = 0;
			if (mkdir(p, 0700) != 0 && errno != EEXIST) {
				set(err, xprintf("cannot create %s: %s", p, strerror(errno)));
				free(p);
				return false;
			}
			if (end)
				break;
			*s = '/';
		}
	}
	free(p);
	return true;
}

int rt_cache_open_dir(const char *dir, bool create, char **why)
{
	struct stat st;
	char *bad;

	set(why, NULL);
	if (create && !rt_make_dirs(dir, why))
		return -1;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT || create)
			set(why, xprintf("cannot open the cache folder %s: %s", dir, strerror(errno)));
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		set(why, xprintf("cannot open the cache folder %s: %s", dir, strerror(errno)));
		close(fd);
		return -1;
	}
	if ((bad = not_private(&st, dir))) {
		set(why, xprintf("the cache folder %s; not used", bad));
		free(bad);
		close(fd);
		return -1;
	}
	return fd;
}

/* The whole entry file `name` in dfd, checked to be a private regular file (malloc'd), or
 * NULL with *why (NULL when there is no entry). */
static char *read_entry(int dfd, const char *name, const char *path, size_t *size, char **why)
{
	struct stat st;
	char *bad, *buf = NULL;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0) {
		if (errno != ENOENT)
			set(why, xprintf("%s: cannot open: %s", path, strerror(errno)));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		set(why, xprintf("%s: not a regular file", path));
	} else if ((bad = not_private(&st, path))) {
		set(why, bad);
	} else if ((uint64_t)st.st_size > CACHE_MAX + sizeof(CacheHeader)) {
		set(why, xprintf("%s: too large (%lld bytes)", path, (long long)st.st_size));
	} else {
		size_t n = (size_t)st.st_size, got = 0;
		ssize_t r = 0;
		buf = xmalloc(n + 1);
		while (got < n && ((r = read(fd, buf + got, n - got)) > 0 || (r < 0 && errno == EINTR)))
			got += r > 0 ? (size_t)r : 0;
		if (got != n) {
			set(why, xprintf("%s: cannot read", path));
			free(buf);
			buf = NULL;
		}
		*size = n;
	}
	close(fd);
	return buf;
}

bool rt_cache_load(const char *dir, RtCacheKey key, char **data, size_t *len, char **why)
{
	char *name = entry_name(key), *path = rt_cache_path(dir, key), *file = NULL;
	unsigned char digest[SHA256_BYTES];
	size_t size = 0;
	CacheHeader h;
	Sha256 s;
	bool ok = false;

	*data = NULL;
	*len = 0;
	set(why, NULL);
	int dfd = rt_cache_open_dir(dir, false, why);
	if (dfd < 0 || !(file = read_entry(dfd, name, path, &size, why)))
		goto done; /* no folder or no entry (no *why): not an error */
	if (size < sizeof h) {
		set(why, xprintf("%s: truncated header (%zu bytes)", path, size));
		goto done;
	}
	memcpy(&h, file, sizeof h);
	if (memcmp(h.magic, CACHE_MAGIC, 8) != 0) {
		set(why, xprintf("%s: bad magic", path));
		goto done;
	}
	if (memcmp(h.key, key.b, sizeof h.key) != 0) {
		set(why, xprintf("%s: stored under another key", path));
		goto done;
	}
	if (h.len > CACHE_MAX || h.len != (uint64_t)(size - sizeof h)) {
		set(why, xprintf("%s: length %llu does not match the file (%zu bytes)", path,
			         (unsigned long long)h.len, size));
		goto done;
	}
	sha256_init(&s);
	sha256_update(&s, file + sizeof h, (size_t)h.len);
	sha256_final(&s, digest);
	if (memcmp(digest, h.digest, sizeof digest) != 0) {
		set(why, xprintf("%s: checksum mismatch", path));
		goto done;
	}
	*len = (size_t)h.len;
	*data = xmalloc(*len + 1);
	memcpy(*data, file + sizeof h, *len);
	(*data)[*len] = 0;
	ok = true;
done:
	if (dfd >= 0)
		close(dfd);
	free(file);
	free(name);
	free(path);
	return ok;
}

/* Writes all of data to fd. */
static bool write_all(int fd, const void *data, size_t n)
{
	const char *p = data;

	while (n > 0) {
		ssize_t r = write(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		p += r;
		n -= (size_t)r;
	}
	return true;
}

bool rt_cache_store(const char *dir, RtCacheKey key, const void *data, size_t len, char **err)
{
	static int counter;
	char *name = entry_name(key), *path = rt_cache_path(dir, key), *tmp = NULL;
	CacheHeader h;
	Sha256 s;
	bool ok = false;

	set(err, NULL);
	int dfd = rt_cache_open_dir(dir, true, err);
	if (dfd < 0)
		goto done;
	memset(&h, 0, sizeof h);
	memcpy(h.magic, CACHE_MAGIC, 8);
	memcpy(h.key, key.b, sizeof h.key);
	h.len = len;
	sha256_init(&s);
	sha256_update(&s, data, len);
	sha256_final(&s, h.digest);
	tmp = xprintf(".%.16s.tmp.%d.%d", name, (int)getpid(),
		      __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		set(err, xprintf("cannot write %s/%s: %s", dir, tmp, strerror(errno)));
		goto done;
	}
	ok = write_all(fd, &h, sizeof h) && write_all(fd, data, len);
	ok = close(fd) == 0 && ok;
	if (ok && renameat(dfd, tmp, dfd, name) != 0)
		ok = false;
	if (!ok) {
		set(err, xprintf("cannot write %s: %s", path, strerror(errno)));
		unlinkat(dfd, tmp, 0);
	}
done:
	if (dfd >= 0)
		close(dfd);
	free(tmp);
	free(name);
	free(path);
	return ok;
}
