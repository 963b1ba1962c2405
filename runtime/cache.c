/* cache.c: the on-disk cache of compiled binaries (runtime.h).
 *
 * Entry layout (little-endian host order; the cache is per machine):
 *     char     magic[8]  "FUSCBIN1"
 *     uint64_t key       the key the entry was stored under (guards against renamed files)
 *     uint64_t len       payload bytes
 *     uint64_t checksum  hash_fnv1a(0, payload, len)
 *     payload
 * A file shorter than its header says, longer, with another magic, key or checksum is
 * rejected, never loaded. Stores write DIR/.KEY.tmp.PID.N and rename it over DIR/KEY.cubin,
 * which is atomic on POSIX file systems, so a reader sees the old entry or the new one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtime.h"

#define CACHE_MAGIC "FUSCBIN1"
#define CACHE_MAX (1ull << 31) /* a larger payload is surely corrupt */

typedef struct CacheHeader {
	char magic[8];
	uint64_t key;
	uint64_t len;
	uint64_t checksum;
} CacheHeader;

static char *msg(const char *fmt, ...) PRINTF(1, 2);
static char *msg(const char *fmt, ...)
{
	Buf b = {0};
	va_list ap;

	va_start(ap, fmt);
	buf_vprintf(&b, fmt, ap);
	va_end(ap);
	return b.s;
}

static void set(char **out, char *s)
{
	if (out)
		*out = s;
	else
		free(s);
}

uint64_t rt_cache_key(const char *source, const char *options, int arch)
{
	uint64_t h = hash_fnv1a(0, "fusc " FUSC_VERSION, strlen("fusc " FUSC_VERSION) + 1);

	h = hash_fnv1a(h, &arch, sizeof arch);
	h = hash_fnv1a(h, options ? options : "", strlen(options ? options : "") + 1);
	return hash_fnv1a(h, source ? source : "", strlen(source ? source : ""));
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

char *rt_cache_path(const char *dir, uint64_t key)
{
	return msg("%s/%016llx.cubin", dir, (unsigned long long)key);
}

bool rt_cache_load(const char *dir, uint64_t key, char **data, size_t *len, char **why)
{
	char *path = rt_cache_path(dir, key);
	FILE *f = fopen(path, "rb");
	CacheHeader h;
	char *buf = NULL;
	long size;

	*data = NULL;
	*len = 0;
	set(why, NULL);
	if (!f) {
		free(path);
		return false; /* no entry: not an error */
	}
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		set(why, msg("%s: cannot read", path));
		goto fail;
	}
	if ((size_t)size < sizeof h || fread(&h, sizeof h, 1, f) != 1) {
		set(why, msg("%s: truncated header (%ld bytes)", path, size));
		goto fail;
	}
	if (memcmp(h.magic, CACHE_MAGIC, 8) != 0) {
		set(why, msg("%s: bad magic", path));
		goto fail;
	}
	if (h.key != key) {
		set(why, msg("%s: stored under another key", path));
		goto fail;
	}
	if (h.len > CACHE_MAX || h.len != (uint64_t)size - sizeof h) {
		set(why, msg("%s: length %llu does not match the file (%ld bytes)", path,
			     (unsigned long long)h.len, size));
		goto fail;
	}
	buf = xmalloc(h.len + 1);
	if (h.len && fread(buf, h.len, 1, f) != 1) {
		set(why, msg("%s: truncated payload", path));
		goto fail;
	}
	buf[h.len] = 0;
	if (hash_fnv1a(0, buf, h.len) != h.checksum) {
		set(why, msg("%s: checksum mismatch", path));
		goto fail;
	}
	fclose(f);
	free(path);
	*data = buf;
	*len = h.len;
	return true;
fail:
	fclose(f);
	free(path);
	free(buf);
	return false;
}

/* mkdir -p */
static bool make_dirs(const char *dir, char **err)
{
	char *p = xstrdup(dir);

	for (char *s = p + 1;; s++) {
		bool end = *s == 0;
		if (*s == '/' || end) {
			*s = 0;
			if (mkdir(p, 0777) != 0 && errno != EEXIST) {
				set(err, msg("cannot create %s: %s", p, strerror(errno)));
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

bool rt_cache_store(const char *dir, uint64_t key, const void *data, size_t len, char **err)
{
	static int counter;
	CacheHeader h;
	char *path, *tmp;
	FILE *f;
	bool ok;

	if (!make_dirs(dir, err))
		return false;
	memcpy(h.magic, CACHE_MAGIC, 8);
	h.key = key;
	h.len = len;
	h.checksum = hash_fnv1a(0, data, len);
	path = rt_cache_path(dir, key);
	tmp = msg("%s/.%016llx.tmp.%d.%d", dir, (unsigned long long)key, (int)getpid(),
		  __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
	f = fopen(tmp, "wb");
	if (!f) {
		set(err, msg("cannot write %s: %s", tmp, strerror(errno)));
		free(tmp);
		free(path);
		return false;
	}
	ok = fwrite(&h, sizeof h, 1, f) == 1 && (len == 0 || fwrite(data, len, 1, f) == 1);
	ok = fclose(f) == 0 && ok;
	if (ok && rename(tmp, path) != 0)
		ok = false;
	if (!ok) {
		set(err, msg("cannot write %s: %s", path, strerror(errno)));
		unlink(tmp);
	}
	free(tmp);
	free(path);
	return ok;
}
