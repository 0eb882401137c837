// The `batontest` PCM: a playback sound card made of a clock, for tests on machines without one.
//
// An alsa-lib ioplug plugin. While running, the "DMA" consumes frames at rate × (1 + drift) from
// CLOCK_MONOTONIC; the hardware pointer is a pure function of that clock and of the commands read from
// the card's control file, so the plugin needs no thread of its own: every callback first brings the
// card up to the present ("sync"), then answers. Consumption is lazy but exact: what a period boundary
// was reached at is computed, not observed, so the timing sidecar says when each period was taken even
// if nobody called the plugin at that moment.
//
// Real-time rule: pointer, transfer, delay, poll_revents, start and stop never allocate. Buffers are
// allocated at open and hw_params; records are formatted by hand into a preallocated line buffer and
// written with write(2).
//
// Semantics follow the kernel's PCM core where ioplug allows (docs/TESTING.md lists where it does not):
// an underrun is detected at the first pointer granule at which the hardware pointer reaches the
// application pointer (avail >= buffer, the default stop threshold); the stream then stays in XRUN
// until snd_pcm_prepare.
#define _GNU_SOURCE
// alsa-lib's headers emit the versioned entry symbol (_snd_pcm_batontest_open_dlsym_pcm_001) only for
// shared objects; without PIC they register it in a static table instead (snd_dlsym_start), which
// a dlopen()ed module cannot resolve. SwiftPM does not define PIC, so the plugin does.
#ifndef PIC
#define PIC 1
#endif
#include <alsa/asoundlib.h>
#include <alsa/pcm_external.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "BatonTestCard.h"

enum {
    MAX_RATES = 16,
    MAX_FORMATS = 3,
    MAX_CHANNELS = 8,
    MAX_SIZES = MAX_FORMATS * MAX_CHANNELS,
    COMMAND_BUFFER = 4096,
    OUTPUT_BUFFER = 8192,
    LINE_MAX_BYTES = 160,
};

/// Frame positions are kept in frames × 10^18, so that rate changes keep the sub-frame remainder.
#define POSITION_SCALE ((__int128)1000000000000000000LL)

typedef struct card {
    snd_pcm_ioplug_t io;

    // The definition.
    unsigned int rates[MAX_RATES];
    unsigned int rate_count;
    unsigned int formats[MAX_FORMATS];
    unsigned int format_count;
    unsigned int channels[MAX_CHANNELS];
    unsigned int channel_count;
    snd_pcm_uframes_t period;
    snd_pcm_uframes_t buffer;
    bool frame_pointer;          // pointer granularity: one frame, or (default) one period
    // What a rewind does: follows it (REWIND_FOLLOW), or stops the stream (XRUN) as a driver that
    // cannot take back: prepared or running (REWIND_XRUN), or only once running (REWIND_XRUN_RUNNING).
    enum { REWIND_FOLLOW, REWIND_XRUN, REWIND_XRUN_RUNNING } rewind_mode;
    int64_t drift_ppb;           // the current drift level, parts per billion
    char control_path[PATH_MAX];
    char record_path[PATH_MAX];
    char timing_path[PATH_MAX];
    char busy_path[PATH_MAX];    // while this file exists the card is held by another program

    int control_fd, record_fd, timing_fd, timer_fd;
    int notify_fd;               // inotify on the control file: a command wakes a blocked writer
    off_t control_done;          // bytes of the control log already acted on
    bool replaying;              // reading the log at open: only levels count
    bool unplugged;
    bool dead;                   // consumes nothing until `revive` (a level: every open sees it)

    // Set up by hw_params and sw_params.
    unsigned int frame_bytes;
    unsigned char *ring;         // a copy of the device buffer, to record frames when consumed
    size_t ring_bytes;
    snd_pcm_uframes_t avail_min;
    snd_pcm_uframes_t boundary;
    int64_t rate_scale;          // rate × (10^9 + drift_ppb): position units per nanosecond

    // The stream, counted from the last prepare.
    uint64_t written;            // application pointer
    uint64_t hw;                 // frames consumed (hardware pointer, in granules, never past written)
    uint64_t total_base;         // frames consumed by this handle before the last prepare
    bool running;                // the device clock is consuming
    bool suspend_norecover;
    bool suspended_running;
    snd_pcm_state_t suspended_from;
    int64_t base_ns;             // position(t) = base_pos + max(0, t - base_ns) × rate_scale
    __int128 base_pos;
    int64_t stall_until;

    char commands[COMMAND_BUFFER];
    char output[OUTPUT_BUFFER];
    size_t output_length;
} card_t;

// MARK: - Clock

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static __int128 position_at(const card_t *c, int64_t t) {
    if (t <= c->base_ns) return c->base_pos;
    return c->base_pos + (__int128)(t - c->base_ns) * c->rate_scale;
}

/// The first instant at which the consumed position reaches `frame` (in the current clock segment).
static int64_t time_of(const card_t *c, uint64_t frame) {
    __int128 target = (__int128)frame * POSITION_SCALE;
    if (target <= c->base_pos || c->rate_scale <= 0) return c->base_ns;
    __int128 d = target - c->base_pos;
    return c->base_ns + (int64_t)((d + c->rate_scale - 1) / c->rate_scale);
}

/// Starts a new clock segment at `t` (before a rate change), keeping the position continuous.
static void resegment(card_t *c, int64_t t) {
    if (t > c->base_ns) {
        c->base_pos = position_at(c, t);
        c->base_ns = t;
    }
}

static uint64_t granule(const card_t *c) { return c->frame_pointer ? 1 : c->period; }

static snd_pcm_uframes_t avail(const card_t *c) { return c->buffer - (snd_pcm_uframes_t)(c->written - c->hw); }

// MARK: - Records (no allocation: formatted by hand into c->output)

static void record_event(card_t *c, int64_t ns, uint64_t frames, const char *event, const char *detail);
static uint64_t total(const card_t *c);

/// `v` in decimal, NUL-terminated, into `out` (at least 21 bytes).
static void decimal(char *out, uint64_t v) {
    char digits[24];
    int n = 0, m = 0;
    do { digits[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (n) out[m++] = digits[--n];
    out[m] = 0;
}

/// A write of the card's own files taking this long is noted in the sidecar ("slow-write <µs>"):
/// the card writes from the caller's thread (the application's real-time output thread), and a
/// file system that blocks it (a journal commit, dirty-page throttling) can make it underrun, which
/// is the test rig's doing, not the application's.
#define SLOW_WRITE_NS 2000000LL

/// write(2), timed: a slow one gets a "slow-write" line (its duration in µs) at the instant it began.
static void timed_write(card_t *c, int fd, const void *bytes, size_t n) {
    int64_t began = now_ns();
    if (write(fd, bytes, n) < 0) {
        // A test that reads the file will see what is missing; nothing else to do here.
    }
    int64_t took = now_ns() - began;
    if (took < SLOW_WRITE_NS) return;
    char detail[24];
    decimal(detail, (uint64_t)took / 1000);
    record_event(c, began, total(c), "slow-write", detail);
}

static void flush_output(card_t *c) {
    if (c->output_length == 0) return;
    size_t n = c->output_length;
    c->output_length = 0;   // before the write: a slow one adds its own line to the emptied buffer
    if (c->timing_fd >= 0) timed_write(c, c->timing_fd, c->output, n);
}

static void put_text(card_t *c, const char *s) {
    while (*s && c->output_length < OUTPUT_BUFFER) c->output[c->output_length++] = *s++;
}

static void put_u64(card_t *c, uint64_t v) {
    char digits[24];
    decimal(digits, v);
    put_text(c, digits);
}

static void put_i64(card_t *c, int64_t v) {
    if (v < 0) { put_text(c, "-"); put_u64(c, (uint64_t)(-(v + 1)) + 1); } else put_u64(c, (uint64_t)v);
}

/// One sidecar line: `<CLOCK_MONOTONIC ns> <frames consumed since open> <event>[ <detail>]`.
static void record_event(card_t *c, int64_t ns, uint64_t frames, const char *event, const char *detail) {
    if (c->timing_fd < 0) return;
    if (c->output_length + LINE_MAX_BYTES > OUTPUT_BUFFER) flush_output(c);
    put_i64(c, ns);
    put_text(c, " ");
    put_u64(c, frames);
    put_text(c, " ");
    put_text(c, event);
    if (detail && *detail) { put_text(c, " "); put_text(c, detail); }
    put_text(c, "\n");
}

static uint64_t total(const card_t *c) { return c->total_base + c->hw; }

/// Writes the consumed frames [from, to) of the ring to the record file.
static void record_frames(card_t *c, uint64_t from, uint64_t to) {
    if (c->record_fd < 0 || !c->ring || to <= from) return;
    while (from < to) {
        uint64_t at = from % c->buffer;
        uint64_t n = to - from;
        if (n > c->buffer - at) n = c->buffer - at;
        timed_write(c, c->record_fd, c->ring + at * c->frame_bytes, (size_t)n * c->frame_bytes);
        from += n;
    }
}

/// Moves the hardware pointer to `upto` (frames since prepare): records the frames and a line for
/// every period boundary passed, at the instant the clock reached it.
static void consume(card_t *c, uint64_t upto) {
    if (upto <= c->hw) return;
    for (uint64_t b = (c->hw / c->period + 1) * c->period; b <= upto; b += c->period)
        record_event(c, time_of(c, b), c->total_base + b, "period", NULL);
    record_frames(c, c->hw, upto);
    c->hw = upto;
}

// MARK: - The device

/// Brings consumption up to `now` with the current clock segment; detects the underrun.
static void advance(card_t *c, int64_t now) {
    if (!c->running) return;
    uint64_t g = granule(c);
    uint64_t position = (uint64_t)(position_at(c, now) / POSITION_SCALE);
    uint64_t hw = position / g * g;
    if (hw < c->written) {
        consume(c, hw);
        return;
    }
    // The buffer ran empty: at the first granule at or past the last written frame.
    uint64_t end = (c->written + g - 1) / g * g;
    int64_t at = time_of(c, end);
    consume(c, c->written);
    c->running = false;
    if (c->io.state == SND_PCM_STATE_DRAINING) {
        record_event(c, at, total(c), "drained", NULL);
    } else {
        record_event(c, at, total(c), "xrun", "underrun");
        // When the caller (the output thread) found it — how long it was away — and on which CPU
        // (not always the one it was held on: a thread held by one CPU's stall can wake on another).
        int cpu = sched_getcpu();
        char detail[24] = "";
        if (cpu >= 0) decimal(detail, (uint64_t)cpu);
        record_event(c, now, total(c), "xrun-found", detail);
        snd_pcm_ioplug_set_state(&c->io, SND_PCM_STATE_XRUN);
    }
}

/// Stops the clock at `now` (suspend, unplug, injected xrun), keeping the position for a resume.
static void freeze(card_t *c, int64_t now) {
    resegment(c, now);
    c->running = false;
}

/// Whether the card takes a drift (parts per billion of a ppm value), the same in every form it
/// comes in (an integer, real or string `drift-ppm`, the `drift` command): above -1 000 000 ppm,
/// since that or less is a rate of 0 or below (rate_scale 0: a writer spun for ever, or a false
/// xrun), and at most +1 000 000 ppm (twice the rate).
static bool drift_allowed(int64_t ppb) { return ppb > -1000000000LL && ppb <= 1000000000LL; }

/// Parses a signed decimal ("500", "-12.5") into parts per billion of a ppm value; false for a
/// drift the card does not take (`drift_allowed`).
static bool parse_ppm(const char *s, int64_t *ppb) {
    bool negative = false;
    int64_t whole = 0, fraction = 0, scale = 1000;
    if (*s == '-' || *s == '+') negative = *s++ == '-';
    if (*s < '0' || *s > '9') return false;
    while (*s >= '0' && *s <= '9') { whole = whole * 10 + (*s++ - '0'); if (whole > 1000000) return false; }
    if (*s == '.') {
        s++;
        while (*s >= '0' && *s <= '9') { if (scale > 1) { scale /= 10; fraction += (*s - '0') * scale; } s++; }
    }
    while (*s == ' ' || *s == '\t' || *s == '\r') s++;
    if (*s) return false;
    int64_t value = (whole * 1000 + fraction) * (negative ? -1 : 1);
    if (!drift_allowed(value)) return false;
    *ppb = value;
    return true;
}

static bool parse_count(const char *s, int64_t *out) {
    int64_t v = 0;
    if (*s < '0' || *s > '9') return false;
    while (*s >= '0' && *s <= '9') { v = v * 10 + (*s++ - '0'); if (v > 3600000) return false; }
    while (*s == ' ' || *s == '\t' || *s == '\r') s++;
    if (*s) return false;
    *out = v;
    return true;
}

static void set_rate_scale(card_t *c) {
    c->rate_scale = (int64_t)c->io.rate * (1000000000LL + c->drift_ppb);
}

/// Acts on one control line at `now`. While replaying the log at open, only levels (unplug, drift) count.
static void apply_command(card_t *c, char *line, int64_t now) {
    while (*line == ' ' || *line == '\t') line++;
    size_t n = strlen(line);
    while (n && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r')) line[--n] = 0;
    if (!*line || *line == '#') return;
    char *argument = line;
    while (*argument && *argument != ' ' && *argument != '\t') argument++;
    if (*argument) { *argument++ = 0; while (*argument == ' ' || *argument == '\t') argument++; }
    snd_pcm_state_t state = c->io.state;

    if (strcmp(line, "unplug") == 0) {
        c->unplugged = true;
        if (c->replaying) return;
        advance(c, now);
        freeze(c, now);
        if (state != SND_PCM_STATE_DISCONNECTED) snd_pcm_ioplug_set_state(&c->io, SND_PCM_STATE_DISCONNECTED);
        record_event(c, now, total(c), "unplug", NULL);
    } else if (strcmp(line, "replug") == 0) {
        c->unplugged = false;
        if (!c->replaying) record_event(c, now, total(c), "replug", NULL);
    } else if (strcmp(line, "dead") == 0) {
        // A stall without end, kept across opens (a DAC whose clock is gone): no frame is taken.
        c->dead = true;
        c->stall_until = INT64_MAX / 4;
        if (c->replaying) return;
        if (c->running) {
            advance(c, now);
            if (c->running) {
                resegment(c, now);
                c->base_ns = c->stall_until;
            }
        }
        record_event(c, now, total(c), "dead", NULL);
    } else if (strcmp(line, "revive") == 0) {
        c->dead = false;
        c->stall_until = c->replaying ? 0 : now;
        if (c->replaying) return;
        // From now on at its rate, from where it stood.
        // (The segment had not begun: its position stands at base_pos until base_ns, now.)
        if (c->running && c->base_ns > now) c->base_ns = now;
        record_event(c, now, total(c), "revive", NULL);
    } else if (strcmp(line, "drift") == 0) {
        int64_t ppb;
        if (!parse_ppm(argument, &ppb)) goto unknown;
        if (!c->replaying && c->running) { advance(c, now); resegment(c, now); }
        c->drift_ppb = ppb;
        if (c->io.rate) set_rate_scale(c);
        if (!c->replaying) record_event(c, now, total(c), "drift", argument);
    } else if (c->replaying) {
        return;
    } else if (strcmp(line, "xrun") == 0) {
        advance(c, now);
        if (c->running && c->io.state == SND_PCM_STATE_RUNNING) {
            freeze(c, now);
            snd_pcm_ioplug_set_state(&c->io, SND_PCM_STATE_XRUN);
            record_event(c, now, total(c), "xrun", "injected");
        } else {
            record_event(c, now, total(c), "xrun-ignored", "not running");
        }
    } else if (strcmp(line, "suspend") == 0) {
        bool norecover = strcmp(argument, "norecover") == 0;
        if (*argument && !norecover) goto unknown;
        advance(c, now);
        state = c->io.state;
        if (state == SND_PCM_STATE_PREPARED || state == SND_PCM_STATE_RUNNING || state == SND_PCM_STATE_XRUN ||
            state == SND_PCM_STATE_DRAINING) {
            c->suspended_running = c->running;
            c->suspended_from = state;
            c->suspend_norecover = norecover;
            freeze(c, now);
            snd_pcm_ioplug_set_state(&c->io, SND_PCM_STATE_SUSPENDED);
            record_event(c, now, total(c), "suspend", argument);
        } else {
            record_event(c, now, total(c), "suspend-ignored", "not prepared");
        }
    } else if (strcmp(line, "stall") == 0) {
        int64_t ms;
        if (!parse_count(argument, &ms)) goto unknown;
        int64_t until = now + ms * 1000000LL;
        if (until > c->stall_until) c->stall_until = until;
        if (c->running) {
            advance(c, now);
            if (c->running) {
                resegment(c, now);
                if (c->stall_until > c->base_ns) c->base_ns = c->stall_until;
            }
        }
        record_event(c, now, total(c), "stall", argument);
    } else {
        goto unknown;
    }
    return;
unknown:
    if (!c->replaying) record_event(c, now, total(c), "unknown-command", line);
}

/// Reads what was appended to the control log since last time (one fstat when nothing was).
static void read_control(card_t *c, int64_t now) {
    if (c->control_fd < 0) return;
    struct stat st;
    if (fstat(c->control_fd, &st) != 0 || st.st_size <= c->control_done) return;
    while (c->control_done < st.st_size) {
        ssize_t n = pread(c->control_fd, c->commands, COMMAND_BUFFER - 1, c->control_done);
        if (n <= 0) break;
        char *p = c->commands, *end = c->commands + n;
        char *nl;
        while ((nl = memchr(p, '\n', (size_t)(end - p))) != NULL) {
            *nl = 0;
            apply_command(c, p, now);
            p = nl + 1;
        }
        size_t used = (size_t)(p - c->commands);
        if (used == 0) {
            if (n < COMMAND_BUFFER - 1) break;   // a line still being written
            used = (size_t)n;                    // a line too long to be a command: skip it
        }
        c->control_done += (off_t)used;
    }
}

/// The error the card's state reports to an I/O call, or 0.
static int state_error(const card_t *c) {
    switch (c->io.state) {
    case SND_PCM_STATE_XRUN: return -EPIPE;
    case SND_PCM_STATE_SUSPENDED: return -ESTRPIPE;
    case SND_PCM_STATE_DISCONNECTED: return -ENODEV;
    default: return 0;
    }
}

/// Brings the card up to the present: consumption first, then the commands appended since.
/// Follows the application pointer where it moved without a transfer: snd_pcm_rewind and
/// snd_pcm_forward move it, and ioplug does not tell the plugin. Frames taken back are forgotten, so
/// the next transfer writes over them (a "rewind" line with the stream position it went back to);
/// frames moved forward over play as they were. A rewind into frames already played cannot be
/// undone: the card keeps what it played and records "rewind-late". Returns whether it went back.
static bool follow_application(card_t *c, int64_t now) {
    if (!c->boundary) return false;
    uint64_t appl = (uint64_t)c->io.appl_ptr, mine = c->written % c->boundary;
    if (appl == mine) return false;
    uint64_t ahead = (appl + c->boundary - mine) % c->boundary;
    if (ahead <= c->buffer) {
        c->written += ahead;
        return false;
    }
    uint64_t back = c->boundary - ahead;
    if (back > c->written - c->hw) {
        record_event(c, now, total(c), "rewind-late", NULL);
        back = c->written - c->hw;
    }
    c->written -= back;
    record_event(c, now, c->total_base + c->written, "rewind", NULL);
    return true;
}

/// `rewind xrun`: a prepared or running stream stops (XRUN) at a rewind, as a kernel driver that
/// copies ahead to its hardware and cannot take back does (the kernel's indirect-PCM helpers, the
/// Raspberry Pi's bcm2835: its ack fails, and since Linux 6.4 the stream goes to XRUN, prepared or
/// running). `rewind xrun-running`: only a running one, as a driver that refuses only once it plays.
/// The kernel fails the rewind itself; ioplug cannot, so the error comes at the next call. The
/// frames taken back are forgotten, the rest were never played: `snd_pcm_status` tells how many, as
/// after an underrun.
static void refuse_rewind(card_t *c, int64_t now) {
    bool running = c->running && c->io.state == SND_PCM_STATE_RUNNING;
    bool prepared = !c->running && c->io.state == SND_PCM_STATE_PREPARED;
    if (!(running || (prepared && c->rewind_mode == REWIND_XRUN))) return;
    if (running) freeze(c, now);
    snd_pcm_ioplug_set_state(&c->io, SND_PCM_STATE_XRUN);
    record_event(c, now, total(c), "xrun", "rewind");
}

static int sync_card(card_t *c, int64_t now) {
    bool rewound = follow_application(c, now);
    advance(c, now);
    if (rewound && c->rewind_mode != REWIND_FOLLOW) refuse_rewind(c, now);
    read_control(c, now);
    return state_error(c);
}

/// Arms the poll timer for the instant the writer should wake: at once when there is room (or an
/// error to report), else when the pointer will have freed avail_min frames (or, draining, at the next
/// granule) — as a kernel driver wakes a poller only once avail_min frames are free, so a writer that
/// sets avail_min to several periods wakes that much less often. A command appended to the control
/// file wakes a blocked writer through the second descriptor (inotify), whatever the timer says: a
/// writer blocked through a long stall or on a full, unstarted buffer still sees it at once. Only
/// this changes the timer's readiness; re-arming also clears it.
static void arm_timer(card_t *c, int64_t now) {
    struct itimerspec when = {{0, 0}, {0, 0}};
    int flags = 0;
    int64_t at = -1;                  // -1: disarm; 0: at once
    snd_pcm_state_t state = c->io.state;
    if (c->running) {
        uint64_t g = granule(c);
        if (state == SND_PCM_STATE_DRAINING) {
            uint64_t next = (c->hw / c->period + 1) * c->period, end = (c->written + g - 1) / g * g;
            at = time_of(c, next < end ? next : end);
        } else if (c->written + c->avail_min <= c->buffer + c->hw) {
            at = 0;
        } else {
            uint64_t need = c->written + c->avail_min - c->buffer;
            at = time_of(c, (need + g - 1) / g * g);
        }
    } else if (state == SND_PCM_STATE_PREPARED) {
        at = avail(c) >= c->avail_min ? 0 : -1;
    } else {
        at = 0;
    }
    if (c->control_fd >= 0 && c->notify_fd < 0 && c->io.rate && at != 0) {
        // No inotify (it failed at open): wake once a period, like a period interrupt, to look
        // for commands (those wakes report no event, and alsa-lib polls again).
        int64_t tick = now + (int64_t)c->period * 1000000000LL / c->io.rate;
        if (at < 0 || at > tick) at = tick;
    }
    if (at == 0 || (at > 0 && at <= now)) {
        when.it_value.tv_nsec = 1;    // relative: fires at once
    } else if (at > 0) {
        when.it_value.tv_sec = at / 1000000000LL;
        when.it_value.tv_nsec = at % 1000000000LL;
        flags = TFD_TIMER_ABSTIME;
    }
    timerfd_settime(c->timer_fd, flags, &when, NULL);
}

// MARK: - ioplug callbacks

static int card_start(snd_pcm_ioplug_t *io) {
    card_t *c = io->private_data;
    int64_t now = now_ns();
    int err = sync_card(c, now);
    if (err < 0) { flush_output(c); return err; }
    c->running = true;
    c->base_pos = 0;
    c->base_ns = now > c->stall_until ? now : c->stall_until;
    set_rate_scale(c);
    record_event(c, now, total(c), "start", NULL);
    arm_timer(c, now);
    flush_output(c);
    return 0;
}

static int card_stop(snd_pcm_ioplug_t *io) {
    card_t *c = io->private_data;
    int64_t now = now_ns();
    advance(c, now);
    if (c->running) {
        c->running = false;
        record_event(c, now, total(c), "stop", NULL);
    }
    arm_timer(c, now);
    flush_output(c);
    return 0;
}

/// The hardware pointer, in every state: a stopped stream (xrun, suspend, unplug) keeps it where it
/// stopped, as a kernel driver does, so that `snd_pcm_status` tells the application how many written
/// frames were never played. The state itself (XRUN, set by the card) is what makes I/O fail.
static snd_pcm_sframes_t card_pointer(snd_pcm_ioplug_t *io) {
    card_t *c = io->private_data;
    sync_card(c, now_ns());
    flush_output(c);
    return (snd_pcm_sframes_t)(c->hw % (c->boundary ? c->boundary : c->buffer));
}

static snd_pcm_sframes_t card_transfer(snd_pcm_ioplug_t *io, const snd_pcm_channel_area_t *areas,
                                       snd_pcm_uframes_t offset, snd_pcm_uframes_t size) {
    card_t *c = io->private_data;
    int64_t now = now_ns();
    int err = sync_card(c, now);
    if (err < 0) { flush_output(c); return err; }
    if (size > avail(c)) size = avail(c);
    const unsigned char *source = (const unsigned char *)areas[0].addr + areas[0].first / 8
                                  + offset * (areas[0].step / 8);
    snd_pcm_uframes_t done = 0;
    while (done < size) {
        uint64_t at = (c->written + done) % c->buffer;
        snd_pcm_uframes_t n = size - done;
        if (n > c->buffer - at) n = (snd_pcm_uframes_t)(c->buffer - at);
        memcpy(c->ring + at * c->frame_bytes, source + (size_t)done * c->frame_bytes, (size_t)n * c->frame_bytes);
        done += n;
    }
    c->written += size;
    arm_timer(c, now);
    flush_output(c);
    return (snd_pcm_sframes_t)size;
}

static int card_delay(snd_pcm_ioplug_t *io, snd_pcm_sframes_t *delay) {
    card_t *c = io->private_data;
    int err = sync_card(c, now_ns());
    flush_output(c);
    if (err < 0) return err;
    *delay = (snd_pcm_sframes_t)(c->written - c->hw);
    return 0;
}

static int card_prepare(snd_pcm_ioplug_t *io) {
    card_t *c = io->private_data;
    int64_t now = now_ns();
    advance(c, now);
    if (c->running) {
        c->running = false;
        record_event(c, now, total(c), "stop", NULL);
    }
    read_control(c, now);
    if (c->unplugged || io->state == SND_PCM_STATE_DISCONNECTED) {
        snd_pcm_ioplug_set_state(io, SND_PCM_STATE_DISCONNECTED);
        flush_output(c);
        return -ENODEV;
    }
    c->total_base = total(c);
    c->written = c->hw = 0;
    c->suspend_norecover = c->suspended_running = false;
    record_event(c, now, total(c), "prepare", NULL);
    arm_timer(c, now);
    flush_output(c);
    return 0;
}

static int card_resume(snd_pcm_ioplug_t *io) {
    // alsa-lib ignores this callback's result (snd_pcm_resume on an ioplug always returns 0), so a
    // refused resume is reported the only way left: the stream falls to XRUN, and the next call fails
    // with -EPIPE until snd_pcm_prepare.
    card_t *c = io->private_data;
    int64_t now = now_ns();
    read_control(c, now);
    if (io->state == SND_PCM_STATE_SUSPENDED) {
        if (c->suspend_norecover) {
            snd_pcm_ioplug_set_state(io, SND_PCM_STATE_XRUN);
            record_event(c, now, total(c), "resume-refused", NULL);
        } else {
            if (c->suspended_running) {
                c->running = true;
                c->base_ns = now > c->stall_until ? now : c->stall_until;
            }
            snd_pcm_ioplug_set_state(io, c->suspended_from);
            record_event(c, now, total(c), "resume", NULL);
        }
    }
    arm_timer(c, now);
    flush_output(c);
    return 0;
}

static int card_hw_params(snd_pcm_ioplug_t *io, snd_pcm_hw_params_t *params) {
    (void)params;
    card_t *c = io->private_data;
    if (io->period_size != c->period || io->buffer_size != c->buffer
        || (io->access != SND_PCM_ACCESS_RW_INTERLEAVED && io->access != SND_PCM_ACCESS_MMAP_INTERLEAVED))
        return -EINVAL;
    c->frame_bytes = io->channels * (unsigned int)snd_pcm_format_physical_width(io->format) / 8;
    size_t bytes = (size_t)c->buffer * c->frame_bytes;
    if (bytes != c->ring_bytes) {
        free(c->ring);
        c->ring = calloc(1, bytes);
        c->ring_bytes = c->ring ? bytes : 0;
        if (!c->ring) return -ENOMEM;
    }
    set_rate_scale(c);
    if (c->timing_fd >= 0) {
        // "setup RATE CHANNELS FORMAT PERIOD BUFFER record-offset=BYTES"
        struct stat st;
        uint64_t offset = c->record_fd >= 0 && fstat(c->record_fd, &st) == 0 ? (uint64_t)st.st_size : 0;
        int64_t now = now_ns();
        if (c->output_length + 2 * LINE_MAX_BYTES > OUTPUT_BUFFER) flush_output(c);
        put_i64(c, now); put_text(c, " "); put_u64(c, total(c)); put_text(c, " setup ");
        put_u64(c, io->rate); put_text(c, " "); put_u64(c, io->channels); put_text(c, " ");
        put_text(c, snd_pcm_format_name(io->format)); put_text(c, " ");
        put_u64(c, io->period_size); put_text(c, " "); put_u64(c, io->buffer_size);
        put_text(c, " record-offset="); put_u64(c, offset); put_text(c, "\n");
        flush_output(c);
    }
    return 0;
}

static int card_sw_params(snd_pcm_ioplug_t *io, snd_pcm_sw_params_t *params) {
    card_t *c = io->private_data;
    snd_pcm_uframes_t v;
    if (snd_pcm_sw_params_get_avail_min(params, &v) == 0) c->avail_min = v ? v : 1;
    if (snd_pcm_sw_params_get_boundary(params, &v) == 0) c->boundary = v;
    return 0;
}

static int card_poll_descriptors_count(snd_pcm_ioplug_t *io) {
    card_t *c = io->private_data;
    return c->notify_fd >= 0 ? 2 : 1;
}

static int card_poll_descriptors(snd_pcm_ioplug_t *io, struct pollfd *pfd, unsigned int space) {
    card_t *c = io->private_data;
    if (space < 1) return 0;
    pfd[0].fd = c->timer_fd;
    pfd[0].events = POLLIN;
    pfd[0].revents = 0;
    if (c->notify_fd < 0 || space < 2) return 1;
    pfd[1].fd = c->notify_fd;
    pfd[1].events = POLLIN;
    pfd[1].revents = 0;
    return 2;
}

static int card_poll_revents(snd_pcm_ioplug_t *io, struct pollfd *pfd, unsigned int nfds, unsigned short *revents) {
    card_t *c = io->private_data;
    uint64_t ticks;
    bool fired = nfds >= 1 && (pfd[0].revents & POLLIN);
    if (read(c->timer_fd, &ticks, sizeof ticks) < 0) {
        // EAGAIN: the timer had not fired (or was re-armed since poll returned).
    }
    if (c->notify_fd >= 0) {
        // Empty the notifications: the control file itself is read by sync_card below.
        char events[sizeof(struct inotify_event) + NAME_MAX + 1] __attribute__((aligned(8)));
        while (read(c->notify_fd, events, sizeof events) > 0) {}
    }
    int64_t now = now_ns();
    int err = sync_card(c, now);
    unsigned short events = 0;
    snd_pcm_state_t state = io->state;
    if (err < 0 || !(state == SND_PCM_STATE_PREPARED || state == SND_PCM_STATE_RUNNING ||
                     state == SND_PCM_STATE_DRAINING)) {
        events = POLLOUT | POLLERR;
    } else if (state == SND_PCM_STATE_DRAINING) {
        events = fired ? POLLOUT : 0;
    } else if (avail(c) >= c->avail_min) {
        events = POLLOUT;
    }
    *revents = events;
    arm_timer(c, now);
    flush_output(c);
    return 0;
}

static int card_close(snd_pcm_ioplug_t *io) {
    card_t *c = io->private_data;
    int64_t now = now_ns();
    advance(c, now);
    record_event(c, now, total(c), "close", NULL);
    flush_output(c);
    if (c->control_fd >= 0) close(c->control_fd);
    if (c->record_fd >= 0) close(c->record_fd);
    if (c->timing_fd >= 0) close(c->timing_fd);
    if (c->timer_fd >= 0) close(c->timer_fd);
    if (c->notify_fd >= 0) close(c->notify_fd);
    free(c->ring);
    free(c);
    return 0;
}

static const snd_pcm_ioplug_callback_t card_callbacks = {
    .start = card_start,
    .stop = card_stop,
    .pointer = card_pointer,
    .transfer = card_transfer,
    .close = card_close,
    .hw_params = card_hw_params,
    .sw_params = card_sw_params,
    .prepare = card_prepare,
    .resume = card_resume,
    .poll_descriptors_count = card_poll_descriptors_count,
    .poll_descriptors = card_poll_descriptors,
    .poll_revents = card_poll_revents,
    .delay = card_delay,
};

// MARK: - Definition

/// Reads an integer, or a list of integers (`[ 44100 48000 ]`), into `out`.
static int get_integers(snd_config_t *n, unsigned int *out, unsigned int capacity, unsigned int *count) {
    long v;
    *count = 0;
    if (snd_config_get_type(n) == SND_CONFIG_TYPE_COMPOUND) {
        snd_config_iterator_t i, next;
        snd_config_for_each(i, next, n) {
            if (*count >= capacity || snd_config_get_integer(snd_config_iterator_entry(i), &v) < 0 || v <= 0)
                return -EINVAL;
            out[(*count)++] = (unsigned int)v;
        }
        return *count ? 0 : -EINVAL;
    }
    if (snd_config_get_integer(n, &v) < 0 || v <= 0) return -EINVAL;
    out[(*count)++] = (unsigned int)v;
    return 0;
}

static int parse_format(const char *name, unsigned int *format) {
    snd_pcm_format_t f = snd_pcm_format_value(name);
    if (f != SND_PCM_FORMAT_S16_LE && f != SND_PCM_FORMAT_S32_LE && f != SND_PCM_FORMAT_FLOAT_LE) return -EINVAL;
    *format = (unsigned int)f;
    return 0;
}

static int get_formats(snd_config_t *n, card_t *c) {
    const char *s;
    c->format_count = 0;
    if (snd_config_get_type(n) == SND_CONFIG_TYPE_COMPOUND) {
        snd_config_iterator_t i, next;
        snd_config_for_each(i, next, n) {
            if (c->format_count >= MAX_FORMATS || snd_config_get_string(snd_config_iterator_entry(i), &s) < 0 ||
                parse_format(s, &c->formats[c->format_count]) < 0)
                return -EINVAL;
            c->format_count++;
        }
        return c->format_count ? 0 : -EINVAL;
    }
    if (snd_config_get_string(n, &s) < 0 || parse_format(s, &c->formats[0]) < 0) return -EINVAL;
    c->format_count = 1;
    return 0;
}

static int get_path(snd_config_t *n, char *out) {
    const char *s;
    if (snd_config_get_string(n, &s) < 0 || strlen(s) >= PATH_MAX) return -EINVAL;
    strcpy(out, s);
    return 0;
}

static int get_drift(snd_config_t *n, int64_t *ppb) {
    long i;
    double d;
    const char *s;
    // Out of ±2 000 000 (or NaN) is refused before it is scaled: it would overflow.
    if (snd_config_get_integer(n, &i) == 0) {
        if (i < -2000000 || i > 2000000) return -EINVAL;
        *ppb = (int64_t)i * 1000;
        return drift_allowed(*ppb) ? 0 : -EINVAL;
    }
    if (snd_config_get_real(n, &d) == 0) {
        if (!(d > -2000000.0 && d < 2000000.0)) return -EINVAL;
        *ppb = (int64_t)(d * 1000);
        return drift_allowed(*ppb) ? 0 : -EINVAL;
    }
    if (snd_config_get_string(n, &s) == 0 && parse_ppm(s, ppb)) return 0;
    return -EINVAL;
}

static int parse_definition(card_t *c, snd_config_t *conf) {
    snd_config_iterator_t i, next;
    snd_config_for_each(i, next, conf) {
        snd_config_t *n = snd_config_iterator_entry(i);
        const char *id, *s;
        long v;
        int err = 0;
        if (snd_config_get_id(n, &id) < 0) continue;
        if (strcmp(id, "comment") == 0 || strcmp(id, "type") == 0 || strcmp(id, "hint") == 0) continue;
        if (strcmp(id, "rate") == 0) err = get_integers(n, c->rates, MAX_RATES, &c->rate_count);
        else if (strcmp(id, "channels") == 0) err = get_integers(n, c->channels, MAX_CHANNELS, &c->channel_count);
        else if (strcmp(id, "format") == 0) err = get_formats(n, c);
        else if (strcmp(id, "period") == 0) { err = snd_config_get_integer(n, &v); c->period = v > 0 ? (snd_pcm_uframes_t)v : 0; }
        else if (strcmp(id, "buffer") == 0) { err = snd_config_get_integer(n, &v); c->buffer = v > 0 ? (snd_pcm_uframes_t)v : 0; }
        else if (strcmp(id, "drift-ppm") == 0) err = get_drift(n, &c->drift_ppb);
        else if (strcmp(id, "control") == 0) err = get_path(n, c->control_path);
        else if (strcmp(id, "record") == 0) err = get_path(n, c->record_path);
        else if (strcmp(id, "timing") == 0) err = get_path(n, c->timing_path);
        else if (strcmp(id, "busy") == 0) err = get_path(n, c->busy_path);
        else if (strcmp(id, "pointer") == 0) {
            err = snd_config_get_string(n, &s);
            if (err == 0 && strcmp(s, "frame") == 0) c->frame_pointer = true;
            else if (err == 0 && strcmp(s, "period") != 0) err = -EINVAL;
        } else if (strcmp(id, "rewind") == 0) {
            err = snd_config_get_string(n, &s);
            if (err == 0 && strcmp(s, "xrun") == 0) c->rewind_mode = REWIND_XRUN;
            else if (err == 0 && strcmp(s, "xrun-running") == 0) c->rewind_mode = REWIND_XRUN_RUNNING;
            else if (err == 0 && strcmp(s, "follow") != 0) err = -EINVAL;
        } else {
            SNDERR("batontest: unknown field %s", id);
            return -EINVAL;
        }
        if (err < 0) {
            SNDERR("batontest: invalid value for %s", id);
            return -EINVAL;
        }
    }
    if (c->period == 0 || c->buffer < 2 * c->period || c->buffer % c->period != 0) {
        SNDERR("batontest: buffer must be a multiple (at least 2) of period");
        return -EINVAL;
    }
    for (unsigned int k = 0; k < c->channel_count; k++)
        if (c->channels[k] > MAX_CHANNELS) { SNDERR("batontest: at most 8 channels"); return -EINVAL; }
    return 0;
}

static int open_for_append(const char *path) {
    return *path ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
}

/// Period and buffer sizes in bytes for every allowed frame size, sorted and unique.
static unsigned int byte_sizes(const card_t *c, snd_pcm_uframes_t frames, unsigned int *out) {
    unsigned int count = 0;
    for (unsigned int f = 0; f < c->format_count; f++) {
        for (unsigned int k = 0; k < c->channel_count; k++) {
            unsigned int bytes = (unsigned int)frames * c->channels[k] *
                                 (unsigned int)snd_pcm_format_physical_width((snd_pcm_format_t)c->formats[f]) / 8;
            unsigned int at = 0;
            while (at < count && out[at] < bytes) at++;
            if (at < count && out[at] == bytes) continue;
            memmove(out + at + 1, out + at, (count - at) * sizeof *out);
            out[at] = bytes;
            count++;
        }
    }
    return count;
}

static int set_constraints(card_t *c) {
    // Interleaved, written or mapped: alsa-lib's own plugins (plug, rate, route, ...) map their
    // slave, so a card behind them must offer mmap. ioplug keeps the mapped buffer and hands each
    // commit to `card_transfer`, as a write would. (Not `mmap_rw`: with it ioplug turns writes into
    // commits too, and a commit of a written stream never reaches `card_transfer`.)
    static const unsigned int access[] = { SND_PCM_ACCESS_RW_INTERLEAVED, SND_PCM_ACCESS_MMAP_INTERLEAVED };
    unsigned int sizes[MAX_SIZES];
    int err;
    unsigned int count;
    if ((err = snd_pcm_ioplug_set_param_list(&c->io, SND_PCM_IOPLUG_HW_ACCESS, 2, access)) < 0) return err;
    if ((err = snd_pcm_ioplug_set_param_list(&c->io, SND_PCM_IOPLUG_HW_FORMAT, c->format_count, c->formats)) < 0)
        return err;
    if ((err = snd_pcm_ioplug_set_param_list(&c->io, SND_PCM_IOPLUG_HW_CHANNELS, c->channel_count, c->channels)) < 0)
        return err;
    if ((err = snd_pcm_ioplug_set_param_list(&c->io, SND_PCM_IOPLUG_HW_RATE, c->rate_count, c->rates)) < 0) return err;
    count = byte_sizes(c, c->period, sizes);
    if ((err = snd_pcm_ioplug_set_param_list(&c->io, SND_PCM_IOPLUG_HW_PERIOD_BYTES, count, sizes)) < 0) return err;
    count = byte_sizes(c, c->buffer, sizes);
    if ((err = snd_pcm_ioplug_set_param_list(&c->io, SND_PCM_IOPLUG_HW_BUFFER_BYTES, count, sizes)) < 0) return err;
    unsigned int periods = (unsigned int)(c->buffer / c->period);
    return snd_pcm_ioplug_set_param_minmax(&c->io, SND_PCM_IOPLUG_HW_PERIODS, periods, periods);
}

/// How long a blocking open waits for a busy card before it gives up with -EBUSY. The kernel waits
/// for ever (until a signal); a bound keeps a test that meets the wait from hanging its process.
#define BUSY_WAIT_LIMIT_NS (15LL * 1000000000LL)

/// The kernel's exclusive open (`snd_pcm_open` in sound/core/pcm_native.c): while another program
/// holds the card (here: while `busy_path` exists), a non-blocking open fails with -EBUSY at once, and
/// a blocking one waits (`open_wait`) until the card is let go, here polled every 5 ms and bounded by
/// BUSY_WAIT_LIMIT_NS (then -EBUSY).
static int wait_until_free(const card_t *c, int mode) {
    if (!*c->busy_path || access(c->busy_path, F_OK) != 0) return 0;
    if (mode & SND_PCM_NONBLOCK) return -EBUSY;
    int64_t give_up = now_ns() + BUSY_WAIT_LIMIT_NS;
    while (access(c->busy_path, F_OK) == 0) {
        if (now_ns() >= give_up) return -EBUSY;
        struct timespec pause = { 0, 5000000 };
        nanosleep(&pause, NULL);
    }
    return 0;
}

static void free_card(card_t *c) {
    if (c->control_fd >= 0) close(c->control_fd);
    if (c->record_fd >= 0) close(c->record_fd);
    if (c->timing_fd >= 0) close(c->timing_fd);
    if (c->timer_fd >= 0) close(c->timer_fd);
    if (c->notify_fd >= 0) close(c->notify_fd);
    free(c);
}

SND_PCM_PLUGIN_DEFINE_FUNC(batontest) {
    (void)root;
    if (stream != SND_PCM_STREAM_PLAYBACK) {
        SNDERR("batontest: playback only");
        return -EINVAL;
    }
    card_t *c = calloc(1, sizeof *c);
    if (!c) return -ENOMEM;
    c->control_fd = c->record_fd = c->timing_fd = c->timer_fd = c->notify_fd = -1;
    c->rates[0] = 48000;
    c->rate_count = 1;
    c->formats[0] = SND_PCM_FORMAT_S16_LE;
    c->format_count = 1;
    c->channels[0] = 2;
    c->channel_count = 1;
    c->period = 480;
    c->buffer = 1920;
    int err = parse_definition(c, conf);
    if (err < 0) { free_card(c); return err; }
    c->avail_min = c->period;
    err = wait_until_free(c, mode);
    if (err < 0) { free_card(c); return err; }

    if (*c->control_path) {
        c->control_fd = open(c->control_path, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
        if (c->control_fd < 0) {
            err = -errno;
            SNDERR("batontest: cannot open control file %s", c->control_path);
            free_card(c);
            return err;
        }
        c->replaying = true;
        read_control(c, now_ns());
        c->replaying = false;
        c->notify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (c->notify_fd >= 0 && inotify_add_watch(c->notify_fd, c->control_path, IN_MODIFY) < 0) {
            close(c->notify_fd);
            c->notify_fd = -1;
        }
    }
    if (c->unplugged) { free_card(c); return -ENODEV; }
    if (*c->record_path && !*c->timing_path) {
        if (strlen(c->record_path) + sizeof ".timing" > PATH_MAX) { free_card(c); return -EINVAL; }
        strcpy(c->timing_path, c->record_path);
        strcat(c->timing_path, ".timing");
    }
    c->record_fd = open_for_append(c->record_path);
    c->timing_fd = open_for_append(c->timing_path);
    if ((*c->record_path && c->record_fd < 0) || (*c->timing_path && c->timing_fd < 0)) {
        err = -errno;
        SNDERR("batontest: cannot open record files for %s", c->record_path);
        free_card(c);
        return err;
    }
    c->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (c->timer_fd < 0) { err = -errno; free_card(c); return err; }

    c->io.version = SND_PCM_IOPLUG_VERSION;
    c->io.name = "Baton test card";
    c->io.callback = &card_callbacks;
    c->io.private_data = c;
    c->io.flags = SND_PCM_IOPLUG_FLAG_BOUNDARY_WA | SND_PCM_IOPLUG_FLAG_MONOTONIC;
    c->io.poll_fd = c->timer_fd;
    c->io.poll_events = POLLIN;
    err = snd_pcm_ioplug_create(&c->io, name, stream, mode);
    if (err < 0) { free_card(c); return err; }
    err = set_constraints(c);
    if (err < 0) {
        snd_pcm_ioplug_delete(&c->io);   // calls card_close, which frees c
        return err;
    }
    record_event(c, now_ns(), 0, "open", name);
    flush_output(c);
    *pcmp = c->io.pcm;
    return 0;
}

SND_PCM_PLUGIN_SYMBOL(batontest);

// MARK: - Helper API

int baton_testcard_command(const char *control_path, const char *command) {
    char line[256];
    size_t n = strlen(command);
    if (n == 0 || n + 2 > sizeof line || memchr(command, '\n', n)) return -EINVAL;
    memcpy(line, command, n);
    line[n++] = '\n';
    int fd = open(control_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    ssize_t w = write(fd, line, n);
    int err = w == (ssize_t)n ? 0 : (w < 0 ? -errno : -EIO);
    close(fd);
    return err;
}
