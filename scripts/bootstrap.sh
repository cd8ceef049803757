#!/usr/bin/env bash
# Installs the Debian packages the build needs, when they are missing. Idempotent and quiet when
# everything is present.
set -euo pipefail
packages=(cmake g++ ninja-build ccache pkg-config nlohmann-json3-dev libpcre2-dev libgtest-dev
          libbenchmark-dev libcli11-dev libcpp-httplib-dev libedit-dev liburing-dev python3
          libpng-dev libjpeg62-turbo-dev libwebp-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
