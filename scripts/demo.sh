#!/usr/bin/env bash
set -euo pipefail
echo "the demo is being written"
