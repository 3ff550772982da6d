#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs the npm packages of the integration tests (openai, @anthropic-ai/sdk)
# exactly as the lockfile pins them; skipped when node_modules already matches it.
set -eu
cd "$(dirname "$0")/../tests/integration"
stamp=node_modules/.lock-stamp
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp"; then exit 0; fi
npm ci --no-audit --no-fund --loglevel=error
cp package-lock.json "$stamp"
