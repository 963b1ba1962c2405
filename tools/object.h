/* object.h: fusc --emit=obj, an ahead-of-time object (tools/object.c, docs/embedding.md). */
#ifndef FUSC_TOOLS_OBJECT_H
#define FUSC_TOOLS_OBJECT_H

#include "backend/backend.h"

/* What the object is made of: the lowered kernels and where they came from. */
typedef struct ObjectJob {
	Kernel **ks;
	int nk;
	const char *name;          /* the .fus file's name */
	const char *source;        /* its text */
	size_t source_len;
	const char *prefix;        /* --prefix or NULL */
	const char *guard;         /* the header's include-guard stem */
	int lower_arch;            /* the kernels were lowered for it (the lowest of archs) */
	const char *const *archs;  /* "80", "90a": a cubin each; the PTX of the last, numeric */
	int narchs;
	const char *obj_path;      /* -o */
	const char *h_path;        /* the header beside it, or NULL */
} ObjectJob;

/* NVRTC for each arch, the C source (backend/aot.c) compiled by $CC (default cc), then the
 * object and the header written all or nothing (tools/output.c). An exit status: 0, or 2
 * after a message. */
int object_write(const ObjectJob *job);

#endif
