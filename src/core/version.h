/* SPDX-License-Identifier: Apache-2.0 */
/* version — pacerd's version, as scripts/version.sh tells it at build time
 * (git describe against the release tag, or the VERSION file of a tarball):
 * what --version, /status, the pacerd_build_info metric and the package say. */
#ifndef PACERD_VERSION_H
#define PACERD_VERSION_H
extern const char pacerd_version[];
#endif
