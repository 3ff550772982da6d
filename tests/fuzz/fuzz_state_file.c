/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer: the lanes' state file (sched/state_file.h). Input's first byte
 * chooses: odd, the bytes are a whole file (the header's checks: foreign,
 * version, checksum); even, they are a body put under a header whose
 * checksum holds, so that the records' own checks are what is explored.
 * Whatever is read back is encoded again, and that reads back the same. */
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/state_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *with_checksum(const uint8_t *body, size_t n, size_t *len)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dn = 0;
	if (EVP_Digest(body, n, d, &dn, EVP_sha256(), NULL) != 1)
		return NULL;
	char *out = malloc(128 + n);
	if (out == NULL)
		return NULL;
	int k = snprintf(out, 128, "%s %d sha256=", STATE_FILE_MAGIC, STATE_FILE_VERSION);
	for (unsigned i = 0; i < dn; i++)
		k += snprintf(out + k, 3, "%02x", d[i]);
	out[k++] = '\n';
	memcpy(out + k, body, n);
	*len = (size_t)k + n;
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	size_t len = size - 1;
	char *file = NULL;
	if (data[0] & 1) {
		file = malloc(len ? len : 1);
		if (file != NULL)
			memcpy(file, data + 1, len);
	} else {
		file = with_checksum(data + 1, len, &len);
	}
	if (file == NULL)
		return 0;
	struct state_snapshot s = {0}, again = {0};
	char err[256];
	enum state_file_error e = state_file_decode(file, len, &s, err, sizeof(err));
	free(file);
	if (e != STATE_FILE_OK) {
		if (s.n_lanes + s.n_budgets + s.n_scopes != 0 || err[0] == '\0')
			abort(); /* a failure keeps nothing and says why */
		state_snapshot_free(&s);
		return 0;
	}
	char *out = NULL;
	size_t out_len = 0;
	if (state_file_encode(&s, &out, &out_len, NULL) != 0)
		abort();
	if (state_file_decode(out, out_len, &again, err, sizeof(err)) != STATE_FILE_OK ||
	    again.n_lanes != s.n_lanes || again.n_budgets != s.n_budgets ||
	    again.n_scopes != s.n_scopes)
		abort();
	char *out2 = NULL;
	size_t out2_len = 0;
	if (state_file_encode(&again, &out2, &out2_len, NULL) != 0 || out2_len != out_len ||
	    memcmp(out, out2, out_len) != 0)
		abort(); /* what it writes, it reads the same */
	free(out);
	free(out2);
	state_snapshot_free(&s);
	state_snapshot_free(&again);
	return 0;
}
