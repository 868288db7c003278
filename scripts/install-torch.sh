#!/usr/bin/env bash
# Installs Debian's CPU PyTorch (python3-torch), the independent reference the
# engine's numerics are checked against. Debian's torch works only with
# /usr/bin/python3. Idempotent; needs root (CI runs as root).
set -euo pipefail
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-torch: need root to apt-get install python3-torch" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
timeout 600 apt-get update -qq
timeout 900 apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends python3-torch python3-numpy >/dev/null
/usr/bin/python3 -c 'import torch; print("install-torch: torch", torch.__version__)'
