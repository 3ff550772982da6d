/* SPDX-License-Identifier: Apache-2.0 */
/* version — see version.h. PACERD_VERSION_STRING comes from the Makefile
 * (scripts/version.sh); only this file is rebuilt when it changes. */
#include "core/version.h"

#ifndef PACERD_VERSION_STRING
#define PACERD_VERSION_STRING "unknown"
#endif

const char pacerd_version[] = PACERD_VERSION_STRING;
