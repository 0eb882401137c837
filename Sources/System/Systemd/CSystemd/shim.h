#pragma once
// libsystemd's sd-daemon API. Everything the Systemd wrapper calls imports directly:
// sd_notify and sd_watchdog_enabled are plain functions. sd_notifyf is C-variadic and does not
// import, so the wrapper formats the state string in Swift and calls sd_notify.
#include <systemd/sd-daemon.h>
