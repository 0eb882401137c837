#pragma once
// Baton's virtual ALSA sound card for tests: the `batontest` ioplug PCM type (see docs/TESTING.md).
// alsa-lib loads the plugin from libasound_module_pcm_batontest.so through a `pcm_type.batontest`
// entry; this header is the helper API for programs that inject faults into a running card.

/// Appends one command line (`xrun`, `suspend`, `suspend norecover`, `unplug`, `replug`,
/// `stall MS`, `drift PPM`) to a card's control file, creating the file if needed. The line is
/// written with one write(2) on an O_APPEND descriptor, so commands from several processes never
/// interleave. Returns 0 or a negative errno. Any thread; allocates nothing.
int baton_testcard_command(const char *control_path, const char *command);
