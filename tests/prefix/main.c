/* tests/prefix: rows.fus and cols.fus both define softmax; compiled with --prefix=rows_ and
 * --prefix=cols_, both headers are included and both launchers linked into this program
 * (tests/embed.sh). Without a device it only refuses a null pointer through each launcher,
 * which shows each name reaches its own fusion. */
#include <stdio.h>
#include <string.h>

#include "rows.h"
#include "cols.h"

int main(void)
{
	float y[4];
	if (rows_softmax(NULL, y, 2, 2, 0) != cudaErrorInvalidValue ||
	    !strstr(rows_softmax_last_error(), "rows_softmax: x is a null pointer")) {
		fprintf(stderr, "rows_softmax: %s\n", rows_softmax_last_error());
		return 1;
	}
	if (cols_softmax(NULL, y, 2, 2, 0) != cudaErrorInvalidValue ||
	    !strstr(cols_softmax_last_error(), "cols_softmax: x is a null pointer")) {
		fprintf(stderr, "cols_softmax: %s\n", cols_softmax_last_error());
		return 1;
	}
	printf("rows_softmax and cols_softmax: both linked, each refuses its own null x\n");
	return 0;
}
