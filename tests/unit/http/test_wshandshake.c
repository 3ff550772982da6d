/* SPDX-License-Identifier: Apache-2.0 */
/* wshandshake: the upgrade request's fields, the key and the accept value
 * (RFC 6455 §1.3's example). */
#include <string.h>

#include "http/wshandshake.h"
#include "unit.h"

START_TEST(rfc_example_accept)
{
	char out[WSH_ACCEPT_LEN + 1];
	wsh_accept("dGhlIHNhbXBsZSBub25jZQ==", out);
	ck_assert_str_eq(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}
END_TEST

START_TEST(upgrade_tokens)
{
	ck_assert(wsh_wants_upgrade("websocket", "Upgrade"));
	ck_assert(wsh_wants_upgrade("WebSocket", "keep-alive, Upgrade"));
	ck_assert(wsh_wants_upgrade("h2c, websocket", "upgrade"));
	ck_assert(!wsh_wants_upgrade("websocket", "keep-alive"));
	ck_assert(!wsh_wants_upgrade("websockets", "upgrade"));
	ck_assert(!wsh_wants_upgrade("h2c", "upgrade"));
	ck_assert(!wsh_wants_upgrade(NULL, "upgrade"));
	ck_assert(!wsh_wants_upgrade("websocket", NULL));
}
END_TEST

START_TEST(keys)
{
	ck_assert(wsh_key_valid("dGhlIHNhbXBsZSBub25jZQ=="));
	ck_assert(!wsh_key_valid("dGhlIHNhbXBsZSBub25jZQ="));
	ck_assert(!wsh_key_valid("dGhlIHNhbXBsZSBub25jZQ=a"));
	ck_assert(!wsh_key_valid("dGhlIHNhbXBsZSBub2!jZQ=="));
	ck_assert(!wsh_key_valid(""));
	ck_assert(!wsh_key_valid(NULL));
	char a[WSH_KEY_LEN + 1], b[WSH_KEY_LEN + 1];
	ck_assert_int_eq(wsh_new_key(a), 0);
	ck_assert_int_eq(wsh_new_key(b), 0);
	ck_assert(wsh_key_valid(a));
	ck_assert_str_ne(a, b);
}
END_TEST

START_TEST(handshake_fields)
{
	ck_assert(wsh_hop_field("Sec-WebSocket-Key"));
	ck_assert(wsh_hop_field("sec-websocket-extensions"));
	ck_assert(wsh_hop_field("Sec-WebSocket-Accept"));
	ck_assert(!wsh_hop_field("Sec-WebSocket-Protocol"));
	ck_assert(!wsh_hop_field("Authorization"));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("wshandshake");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, rfc_example_accept);
	tcase_add_test(tc, upgrade_tokens);
	tcase_add_test(tc, keys);
	tcase_add_test(tc, handshake_fields);
	suite_add_tcase(s, tc);
	return s;
}

UNIT_MAIN("wshandshake", suite)
