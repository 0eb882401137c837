#pragma once
// libgpiod v1 (Debian 12: 1.6.3; the v2 API is different and not used). Everything the GPIO wrapper
// calls imports directly, so no shims are needed.
#include <gpiod.h>
