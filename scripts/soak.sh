#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# scripts/soak.sh: a bounded soak of pacerd (see scripts/soak.mjs), not part of make test.
#   SOAK_SECONDS=600 SOAK_RPS=300 scripts/soak.sh
# Builds what it needs, prints sent/answered/lost, fds and RSS, answers by status;
# exits non-zero when a request was lost or fds/RSS grew by more than 5 %.
set -eu
cd "$(dirname "$0")/.."
make -s all build/pacerd-mock
./scripts/install-node-deps.sh >/dev/null
exec node scripts/soak.mjs
