#pragma once
// libmosquitto 2.0 (Debian 12: 2.0.11). Everything the MQTT wrapper calls imports directly: no
// variadic functions and no function-like macros are used, so no shims are needed.
#include <mosquitto.h>
