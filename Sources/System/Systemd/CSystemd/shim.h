#pragma once
// libsystemd's sd-daemon API. Everything the Systemd wrapper calls imports directly:
// sd_notify and sd_watchdog_enabled are plain functions. sd_notifyf is C-variadic and does not
// import, so the wrapper formats the state string in Swift and calls sd_notify.
#include <systemd/sd-daemon.h>
// sd-bus, for MPRIS control of external players (Systemd's DBusConnection). Its convenience calls
// (sd_bus_call_method, sd_bus_message_append) are C-variadic and do not import; the wrapper builds
// messages with sd_bus_message_new_method_call and sd_bus_call, and reads properties with
// sd_bus_get_property_string, all plain functions. SD_BUS_ERROR_NULL is a macro: this zeroed value
// stands in for it.
#include <systemd/sd-bus.h>
static inline sd_bus_error baton_bus_error_null(void) { sd_bus_error e = SD_BUS_ERROR_NULL; return e; }
