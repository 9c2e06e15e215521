#!/usr/bin/env bash
# The software Vulkan driver (Mesa's lavapipe) the wgpu backend runs on where there is no
# GPU: `make test` calls this first, so the wgpu tests run rather than skip. Installed
# with apt when this is Debian/Ubuntu and we are root (CI, containers); otherwise it says
# what to install and the wgpu tests skip with the reason (docs/gpu.md, "Tests").
set -euo pipefail
PACKAGES=(mesa-vulkan-drivers libvulkan1)
have_driver() {
    ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1 ' && ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1
}
if have_driver; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing the software Vulkan driver for the wgpu tests: ${PACKAGES[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null; }
    have_driver && exit 0
    echo "the software Vulkan driver did not install; the wgpu tests will skip" >&2
    exit 0
fi
echo "no Vulkan driver: the wgpu tests will skip (as root: apt-get install --no-install-recommends ${PACKAGES[*]})" >&2
