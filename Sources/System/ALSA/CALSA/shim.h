#pragma once
#include <alsa/asoundlib.h>

// alsa-lib prints its own errors to stderr through a variadic handler, which Swift cannot define.
// Baton reports every ALSA error itself (typed, with the PCM name), so the library's chatter is
// silenced here.
static void baton_alsa_silent_handler(const char *file, int line, const char *function, int err,
                                      const char *fmt, ...) {
    (void)file; (void)line; (void)function; (void)err; (void)fmt;
}

static inline void baton_alsa_silence_errors(void) {
    snd_lib_error_set_handler(baton_alsa_silent_handler);
}
