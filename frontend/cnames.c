/* cnames.c: the names a fusion cannot have (docs/cli.md, "Fusion names").
 *
 * A fusion's launcher is a global C function of the fusion's name, declared in a header that
 * C and C++ programs include beside <stdlib.h>, <math.h> and <cuda_runtime.h>. So a fusion
 * cannot be named after a C or C++ keyword, `main`, a function or macro of the C standard
 * library (C11, the headers below; the <math.h> functions with their f and l variants), a
 * CUDA runtime name (cuda + a capital letter) or an identifier C reserves to the
 * implementation (starting with "__" or "_" and a capital letter).
 */
#include <ctype.h>
#include <string.h>

#include "frontend/frontend.h"

/* Space-separated names, one list per header. */
static const struct {
	const char *what;
	const char *names;
} lists[] = {
	{"a C keyword",
	 "auto break case char const continue default do double else enum extern float for goto "
	 "if inline int long register restrict return short signed sizeof static struct switch "
	 "typedef union unsigned void volatile while alignas alignof bool constexpr false "
	 "nullptr static_assert thread_local true typeof typeof_unqual"},
	{"a C++ keyword",
	 "and and_eq asm bitand bitor catch char8_t char16_t char32_t class compl concept "
	 "consteval constinit const_cast co_await co_return co_yield decltype delete "
	 "dynamic_cast explicit export friend mutable namespace new noexcept not not_eq operator "
	 "or or_eq private protected public reinterpret_cast requires static_cast template this "
	 "throw try typeid typename using virtual wchar_t xor xor_eq"},
	{"the program's entry point", "main"},
	{"a C standard library name (<stdlib.h>)",
	 "atof atoi atol atoll strtod strtof strtold strtol strtoll strtoul strtoull rand srand "
	 "aligned_alloc calloc free malloc realloc abort atexit at_quick_exit exit getenv "
	 "quick_exit system bsearch qsort abs labs llabs div ldiv lldiv mblen mbtowc wctomb "
	 "mbstowcs wcstombs"},
	{"a C standard library name (<stdio.h>)",
	 "remove rename tmpfile tmpnam fclose fflush fopen freopen setbuf setvbuf fprintf fscanf "
	 "printf scanf snprintf sprintf sscanf vfprintf vfscanf vprintf vscanf vsnprintf vsprintf "
	 "vsscanf fgetc fgets fputc fputs getc getchar gets putc putchar puts ungetc fread fwrite "
	 "fgetpos fseek fsetpos ftell rewind clearerr feof ferror perror stdin stdout stderr"},
	{"a C standard library name (<string.h>)",
	 "memcpy memmove strcpy strncpy strcat strncat memcmp strcmp strcoll strncmp strxfrm "
	 "memchr strchr strcspn strpbrk strrchr strspn strstr strtok memset strerror strlen"},
	{"a C standard library name (<ctype.h>)",
	 "isalnum isalpha isblank iscntrl isdigit isgraph islower isprint ispunct isspace isupper "
	 "isxdigit tolower toupper"},
	{"a C standard library name (<time.h>)",
	 "clock difftime mktime time timespec_get asctime ctime gmtime localtime strftime"},
	{"a C standard library name (<signal.h>, <setjmp.h>, <locale.h>, <stdarg.h>, <assert.h>, "
	 "<errno.h>)",
	 "signal raise setjmp longjmp setlocale localeconv va_start va_arg va_end va_copy assert "
	 "errno"},
	{"a C standard library name (<math.h>)",
	 "fpclassify isfinite isinf isnan isnormal signbit isgreater isgreaterequal isless "
	 "islessequal islessgreater isunordered"},
};

/* The <math.h> functions; each also with an f (float) and an l (long double) suffix. */
static const char math_names[] =
	"acos asin atan atan2 cos sin tan acosh asinh atanh cosh sinh tanh exp exp2 expm1 frexp "
	"ilogb ldexp log log10 log1p log2 logb modf scalbn scalbln cbrt fabs hypot pow sqrt erf "
	"erfc lgamma tgamma ceil floor nearbyint rint lrint llrint round lround llround trunc "
	"fmod remainder remquo copysign nan nextafter nexttoward fdim fmax fmin fma";

/* Whether the first n bytes of name are one of the space-separated words of list. */
static bool in_list(const char *list, const char *name, size_t n)
{
	for (const char *p = list; *p;) {
		size_t len = strcspn(p, " ");
		if (len == n && strncmp(p, name, n) == 0)
			return true;
		p += len;
		p += *p == ' ';
	}
	return false;
}

const char *sema_c_name_clash(const char *name)
{
	size_t n = strlen(name);

	if (strncmp(name, "__", 2) == 0 || (name[0] == '_' && isupper((unsigned char)name[1])))
		return "an identifier C reserves to the implementation";
	if (strncmp(name, "cuda", 4) == 0 && isupper((unsigned char)name[4]))
		return "a CUDA runtime name";
	for (int i = 0; i < countof(lists); i++)
		if (in_list(lists[i].names, name, n))
			return lists[i].what;
	if (in_list(math_names, name, n) ||
	    (n > 1 && (name[n - 1] == 'f' || name[n - 1] == 'l') && in_list(math_names, name, n - 1)))
		return "a C standard library name (<math.h>)";
	return NULL;
}
