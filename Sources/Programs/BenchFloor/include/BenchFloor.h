#pragma once
// The floor for baton-bench: the same resampling job done by the bare C libraries in a plain C
// loop, so the benchmark can show what Baton's pipeline adds on top. Benchmark-only; the daemon
// never links this.

/// Resamples `sources` streams of `seconds` of 48 kHz stereo float to 44.1 kHz with libsoxr HQ
/// in 10 ms blocks. Returns the thread CPU seconds spent, or a negative number on error.
double baton_floor_soxr_hq(int sources, int seconds);

/// The same with libsamplerate at `converter` (SRC_SINC_FASTEST = 2, MEDIUM = 1, BEST = 0).
double baton_floor_samplerate(int sources, int seconds, int converter);

/// The minimal C music pipeline: `target` (http://IPv4:port/path or a file of Ogg Opus) → opusfile
/// → × `gain` → `converter` ("soxr-hq", "soxr-vhq", "src-medium", "src-fastest", …) to 44.1 kHz →
/// S16 → snd_pcm_writei on `device`, one thread. Prints CPU and peak RSS when `report` is set.
/// Returns 0, or an exit status on error.
int baton_floor_pipeline(const char *target, const char *converter, const char *device, double gain, int report);
