// The `baton` PCM: every ALSA program can play through batond.
//
// An alsa-lib ioplug plugin with no thread of its own. The program's frames are sent to batond over a
// Unix stream socket as they are written (transfer); batond answers with POSITION messages saying how
// many frames it has taken off this stream's buffer and how far they still are from the speaker. The
// hardware pointer is that count, so `snd_pcm_writei` blocks while batond's buffer for the program is
// full (a held source blocks its writer), `snd_pcm_delay` is the real delay to the zone's speaker, and
// poll waits on the socket (batond consumed something) and on an eventfd kept readable while there
// is room, so a non-blocking writer with an empty buffer is not left waiting for batond.
//
// Failures: no batond at open → -ECONNREFUSED and one line on stderr saying what and where (-EBUSY
// after 2 s when it takes no connections, its backlog full); batond
// refusing the source or the format → the open or hw_params fails with its sentence on stderr (also
// when it closed the connection before hw_params: its sentence is read then); batond going away while
// the program plays → the next call fails (-EPIPE from writei, then -ENODEV from
// prepare) and poll reports POLLERR at once, so the program never hangs and can reopen.
#define _GNU_SOURCE
// alsa-lib's headers emit the versioned entry symbol only for shared objects (PIC); SwiftPM does not
// define PIC, so the plugin does (as the test card does).
#ifndef PIC
#define PIC 1
#endif
#include <alsa/asoundlib.h>
#include <alsa/pcm_external.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "BatonPCM.h"

enum { INPUT_BUFFER = 1024, NAME_MAX_BYTES = 200, REPLY_TIMEOUT_MS = 3000, SEND_TIMEOUT_S = 2 };

typedef struct baton {
    snd_pcm_ioplug_t io;
    // Held by every callback: alsa-lib calls drain and poll_revents without its own lock (the
    // plugin's to take), so in a program with threads one thread's delay or avail (its pointer
    // callback reads the socket) ran beside another's blocking drain, both reading into `input`
    // (a message split, the connection taken for lost, a wrong count). Released while a call waits
    // in poll (`read_input`), so a drop from another thread still ends a blocking drain.
    pthread_mutex_t lock;
    int fd;
    int ready_fd;            // an eventfd, readable while there is room (avail ≥ avail_min) or an error
    bool ready;
    char source[NAME_MAX_BYTES + 1];
    char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];

    unsigned int frame_bytes;
    uint64_t sent;           // frames sent since open
    uint64_t consumed;       // frames batond took off its buffer since open (≤ sent)
    uint64_t server_delay;   // frames between those and the speaker
    uint64_t base;           // `sent` at the last prepare: the stream's frame 0
    snd_pcm_uframes_t boundary;
    snd_pcm_uframes_t avail_min;
    bool dead;               // the connection failed; every call reports it
    bool drained;            // a DRAINED arrived
    bool draining;           // a DRAIN was sent and its DRAINED not taken yet (non-blocking drain)

    unsigned char input[INPUT_BUFFER];
    size_t input_length;
    char error[INPUT_BUFFER];  // the server's last ERROR sentence
    bool got_ok, got_error;
} baton_t;

// MARK: - The socket

static void update_ready(baton_t *b);

static void fail(baton_t *b) {
    b->dead = true;
    update_ready(b);
    if (b->io.state != SND_PCM_STATE_DISCONNECTED && b->io.pcm) snd_pcm_ioplug_set_state(&b->io, SND_PCM_STATE_XRUN);
}

static int send_message(baton_t *b, uint32_t type, const void *payload, size_t length, const void *more,
                        size_t more_length) {
    if (b->dead) return -ENODEV;
    uint32_t header[2] = {type, (uint32_t)(length + more_length)};
    struct iovec parts[3] = {{header, sizeof header}, {(void *)payload, length}, {(void *)more, more_length}};
    struct msghdr m = {.msg_iov = parts, .msg_iovlen = 3};
    size_t left = sizeof header + length + more_length;
    while (left > 0) {
        ssize_t n = sendmsg(b->fd, &m, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            fail(b);
            return -ENODEV;
        }
        left -= (size_t)n;
        while (m.msg_iovlen > 0 && (size_t)n >= m.msg_iov[0].iov_len) {
            n -= (ssize_t)m.msg_iov[0].iov_len;
            m.msg_iov++;
            m.msg_iovlen--;
        }
        if (m.msg_iovlen > 0) {
            m.msg_iov[0].iov_base = (char *)m.msg_iov[0].iov_base + n;
            m.msg_iov[0].iov_len -= (size_t)n;
        }
    }
    return 0;
}

static uint64_t read_u64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/// Acts on every whole message in the input buffer.
static void parse_input(baton_t *b) {
    size_t at = 0;
    while (b->input_length - at >= 8) {
        uint32_t type, length;
        memcpy(&type, b->input + at, 4);
        memcpy(&length, b->input + at + 4, 4);
        if (length > INPUT_BUFFER - 8) { fail(b); return; }   // not batond
        if (b->input_length - at - 8 < length) break;
        const unsigned char *p = b->input + at + 8;
        switch (type) {
        case BATON_MSG_OK: b->got_ok = true; break;
        case BATON_MSG_ERROR:
            memcpy(b->error, p, length);
            b->error[length] = 0;
            b->got_error = true;
            break;
        case BATON_MSG_POSITION:
            if (length >= 16) {
                uint64_t consumed = read_u64(p);
                if (consumed > b->consumed && consumed <= b->sent) b->consumed = consumed;
                b->server_delay = read_u64(p + 8);
            }
            break;
        case BATON_MSG_DRAINED: b->drained = true; break;
        default: break;
        }
        at += 8 + length;
    }
    memmove(b->input, b->input + at, b->input_length - at);
    b->input_length -= at;
}

/// Reads what batond sent, waiting up to `timeout_ms` (0: what is there; -1: forever) for something,
/// with `lock` let go while it waits (it is held on return). Marks the connection dead at its end.
/// Returns false when it is dead.
static bool read_input(baton_t *b, int timeout_ms) {
    if (b->dead) return false;
    struct pollfd p = {.fd = b->fd, .events = POLLIN};
    if (timeout_ms != 0) pthread_mutex_unlock(&b->lock);
    int ready = poll(&p, 1, timeout_ms);
    int poll_errno = errno;
    if (timeout_ms != 0) pthread_mutex_lock(&b->lock);
    if (b->dead) return false;
    if (ready < 0 && poll_errno != EINTR) { fail(b); return false; }
    if (ready <= 0) return true;
    while (true) {
        ssize_t n = recv(b->fd, b->input + b->input_length, INPUT_BUFFER - b->input_length, MSG_DONTWAIT);
        if (n > 0) {
            b->input_length += (size_t)n;
            parse_input(b);
            if (b->dead) return false;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
        fail(b);   // EOF or a socket error: batond went away
        return false;
    }
}

/// Waits for batond's answer to OPEN or FORMAT: 0, or -errno with the sentence on stderr.
static int await_reply(baton_t *b, const char *what, int refused) {
    b->got_ok = b->got_error = false;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (!b->got_ok && !b->got_error) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long waited = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (waited >= REPLY_TIMEOUT_MS) {
            fprintf(stderr, "baton: batond at %s did not answer %s for source \"%s\" within %d ms\n",
                    b->socket_path, what, b->source, REPLY_TIMEOUT_MS);
            fail(b);
            return -ETIMEDOUT;
        }
        if (!read_input(b, REPLY_TIMEOUT_MS - (int)waited) && !b->got_error) {
            fprintf(stderr, "baton: batond at %s closed the connection for source \"%s\" (%s)\n", b->socket_path,
                    b->source, what);
            return -ECONNRESET;
        }
    }
    if (b->got_error) {
        fprintf(stderr, "baton: batond at %s refused source \"%s\" (%s): %s\n", b->socket_path, b->source, what,
                b->error);
        return refused;
    }
    return 0;
}

// MARK: - ioplug callbacks

static snd_pcm_uframes_t outstanding(const baton_t *b) {
    uint64_t start = b->consumed > b->base ? b->consumed : b->base;
    return (snd_pcm_uframes_t)(b->sent - start);
}

/// Room in the buffer, 0 when what is outstanding fills it or more: a program that moved ALSA's
/// application pointer back (snd_pcm_rewind) could have sent more than the buffer holds, and
/// `buffer_size - outstanding` wrapped to a huge room, a poller woken for ever.
static snd_pcm_uframes_t room(const baton_t *b) {
    snd_pcm_uframes_t held = outstanding(b);
    return held >= b->io.buffer_size ? 0 : b->io.buffer_size - held;
}

/// Keeps the eventfd readable exactly while a program waiting in poll should wake: there is room for
/// avail_min frames, or the connection failed. (The socket alone is readable only when batond has
/// consumed something; a non-blocking writer with an empty buffer would wait for it forever.)
static void update_ready(baton_t *b) {
    // Draining, a program in poll waits for the DRAINED (the socket wakes it), not for room: with
    // room the eventfd woke it at once, again and again, each drain call answered -EAGAIN.
    bool ready = b->dead || b->io.buffer_size == 0
                 || (b->draining ? b->drained : room(b) >= b->avail_min);
    if (ready == b->ready) return;
    uint64_t v = 1;
    if (ready) {
        if (write(b->ready_fd, &v, sizeof v) < 0) {
            // EAGAIN: already readable.
        }
    } else if (read(b->ready_fd, &v, sizeof v) < 0) {
        // EAGAIN: already clear.
    }
    b->ready = ready;
}

/// After input was read: a DRAINED that came for a pending non-blocking drain ends it as the kernel
/// ends a drain, the stream set up again (SETUP), and the eventfd follows. MPD calls snd_pcm_drain
/// once and then waits for the state to leave DRAINING (a later drain in SETUP answers 0 at once):
/// left in DRAINING, it waited for ever at the end of its queue.
static void settle(baton_t *b) {
    if (b->draining && b->drained && b->io.state == SND_PCM_STATE_DRAINING) {
        b->draining = false;
        snd_pcm_ioplug_set_state(&b->io, SND_PCM_STATE_SETUP);
    }
    update_ready(b);
}

static int start_locked(snd_pcm_ioplug_t *io) {
    baton_t *b = io->private_data;
    return b->dead ? -ENODEV : 0;
}

static int stop_locked(snd_pcm_ioplug_t *io) {
    baton_t *b = io->private_data;
    // A drain given up (a drop while draining) is forgotten by batond too: its DRAINED would end
    // the next drain early.
    if (!b->dead && (b->sent > b->consumed || b->draining)) send_message(b, BATON_MSG_DROP, NULL, 0, NULL, 0);
    b->draining = false;
    update_ready(b);
    return 0;
}

static snd_pcm_sframes_t pointer_locked(snd_pcm_ioplug_t *io) {
    baton_t *b = io->private_data;
    bool alive = read_input(b, 0);
    settle(b);
    if (!alive) return -EPIPE;
    // Before hw_params there is no buffer (and no boundary) to wrap the pointer at: snd_pcm_status
    // right after the open divided by zero (SIGFPE).
    if (io->buffer_size == 0) return 0;
    uint64_t hw = b->consumed > b->base ? b->consumed - b->base : 0;
    return (snd_pcm_sframes_t)(hw % (b->boundary ? b->boundary : io->buffer_size));
}

static snd_pcm_sframes_t transfer_locked(snd_pcm_ioplug_t *io, const snd_pcm_channel_area_t *areas,
                                        snd_pcm_uframes_t offset, snd_pcm_uframes_t size) {
    baton_t *b = io->private_data;
    if (b->dead) return -ENODEV;
    const unsigned char *frames =
        (const unsigned char *)areas[0].addr + areas[0].first / 8 + offset * (areas[0].step / 8);
    int err = send_message(b, BATON_MSG_DATA, frames, (size_t)size * b->frame_bytes, NULL, 0);
    if (err < 0) return err;
    b->sent += size;
    update_ready(b);
    return (snd_pcm_sframes_t)size;
}

static int delay_locked(snd_pcm_ioplug_t *io, snd_pcm_sframes_t *delay) {
    baton_t *b = io->private_data;
    bool alive = read_input(b, 0);
    settle(b);
    if (!alive) return -ENODEV;
    *delay = (snd_pcm_sframes_t)(outstanding(b) + (b->sent > b->base ? b->server_delay : 0));
    return 0;
}

/// Says on stderr why the connection is gone: batond's ERROR sentence when it sent one before it
/// closed ("batond stopped source x", "no FORMAT within 30 s of OPEN", …) — read now if it is still
/// in the socket (a send that failed marked the connection dead unread) — else that batond was lost.
static void say_lost(baton_t *b) {
    if (!b->got_error) {
        b->dead = false;
        read_input(b, 0);
        b->dead = true;
    }
    if (b->got_error)
        fprintf(stderr, "baton: %s (batond at %s, source \"%s\"); reopen the device\n", b->error, b->socket_path,
                b->source);
    else
        fprintf(stderr, "baton: lost batond at %s (source \"%s\"); reopen the device\n", b->socket_path, b->source);
}

static int prepare_locked(snd_pcm_ioplug_t *io) {
    baton_t *b = io->private_data;
    if (!read_input(b, 0)) {
        say_lost(b);
        return -ENODEV;
    }
    // A prepare discards what was written and not played, as a drop does: batond forgets it too
    // (and a pending drain). Only the plugin's count was reset, and what the program had written
    // played on in batond under the buffer it then wrote again.
    if (b->sent > b->consumed || b->draining) send_message(b, BATON_MSG_DROP, NULL, 0, NULL, 0);
    b->base = b->sent;
    b->draining = false;
    update_ready(b);
    return 0;
}

/// Plays out what was sent: DRAIN, then batond's DRAINED once it played the last frame. alsa-lib
/// leaves a non-blocking program's drain to this callback: it answers -EAGAIN until the DRAINED came;
/// the program polls (the socket wakes it) and either calls drain again or waits for the state to
/// leave DRAINING, which `settle` does when the DRAINED is read. It used to wait here in any mode,
/// and MPD's output thread, draining at the end of its queue while a doorbell held the source, hung
/// for the whole interruption (its pause waited on that thread).
static int drain_locked(snd_pcm_ioplug_t *io) {
    baton_t *b = io->private_data;
    if (b->dead) return -ENODEV;
    if (b->sent == b->base) return 0;
    if (!b->draining) {
        if (!read_input(b, 0)) return -ENODEV;   // an earlier drain's DRAINED, if one came late
        b->drained = false;
        int err = send_message(b, BATON_MSG_DRAIN, NULL, 0, NULL, 0);
        if (err < 0) return err;
        b->draining = true;
        update_ready(b);
    }
    if (io->nonblock) {
        if (!read_input(b, 0)) return -ENODEV;
        if (!b->drained) return -EAGAIN;
    } else {
        // `draining` cleared: another thread's call dropped the stream meanwhile (alsa-lib drops a
        // draining stream whose buffer it finds empty), and batond, told DROP, sends no DRAINED;
        // the POSITION it answers a DROP with wakes this wait.
        // Bounded waits: another thread's call (its pointer, while this one let go of `lock` to
        // poll) may read the DRAINED, or the POSITION that answers a DROP, and nothing more comes.
        while (!b->drained && b->draining)
            if (!read_input(b, 100)) return -ENODEV;
    }
    b->draining = false;
    update_ready(b);
    return 0;
}

static int hw_params_locked(snd_pcm_ioplug_t *io, snd_pcm_hw_params_t *params) {
    (void)params;
    baton_t *b = io->private_data;
    uint32_t format;
    switch (io->format) {
    case SND_PCM_FORMAT_S16_LE: format = BATON_FORMAT_S16_LE; break;
    case SND_PCM_FORMAT_S32_LE: format = BATON_FORMAT_S32_LE; break;
    case SND_PCM_FORMAT_FLOAT_LE: format = BATON_FORMAT_FLOAT_LE; break;
    default: return -EINVAL;
    }
    b->frame_bytes = io->channels * (unsigned int)snd_pcm_format_physical_width(io->format) / 8;
    uint32_t f[5] = {format, io->channels, io->rate, (uint32_t)io->buffer_size, (uint32_t)io->period_size};
    int err = send_message(b, BATON_MSG_FORMAT, f, sizeof f, NULL, 0);
    if (err < 0) {
        // batond closed before it (the FORMAT deadline, a refusal, a restart since the open): only
        // "Unable to install hw params: No such device" reached the user, its sentence unread.
        say_lost(b);
        return err;
    }
    b->consumed = b->sent;   // the server forgets what was not consumed under the old format
    return await_reply(b, "the format", -EINVAL);
}

static int sw_params_locked(snd_pcm_ioplug_t *io, snd_pcm_sw_params_t *params) {
    baton_t *b = io->private_data;
    snd_pcm_uframes_t v;
    if (snd_pcm_sw_params_get_boundary(params, &v) == 0) b->boundary = v;
    if (snd_pcm_sw_params_get_avail_min(params, &v) == 0) b->avail_min = v ? v : 1;
    update_ready(b);
    return 0;
}

static int poll_revents_locked(snd_pcm_ioplug_t *io, struct pollfd *pfd, unsigned int nfds,
                              unsigned short *revents) {
    (void)pfd;
    (void)nfds;
    baton_t *b = io->private_data;
    bool alive = read_input(b, 0);
    settle(b);
    if (!alive) {
        *revents = POLLOUT | POLLERR;
        return 0;
    }
    snd_pcm_state_t state = io->state;
    if (state == SND_PCM_STATE_DRAINING) *revents = b->drained ? POLLOUT : 0;
    else if (room(b) >= b->avail_min) *revents = POLLOUT;
    else *revents = 0;
    return 0;
}

static int baton_poll_descriptors_count(snd_pcm_ioplug_t *io) {
    (void)io;
    return 2;
}

static int baton_poll_descriptors(snd_pcm_ioplug_t *io, struct pollfd *pfd, unsigned int space) {
    baton_t *b = io->private_data;
    if (space < 2) return -EINVAL;
    pfd[0] = (struct pollfd){.fd = b->fd, .events = POLLIN};
    pfd[1] = (struct pollfd){.fd = b->ready_fd, .events = POLLIN};
    return 2;
}

static int baton_close(snd_pcm_ioplug_t *io) {
    baton_t *b = io->private_data;
    if (b->fd >= 0) close(b->fd);
    if (b->ready_fd >= 0) close(b->ready_fd);
    pthread_mutex_destroy(&b->lock);
    free(b);
    return 0;
}

// The callbacks, each under `lock` (see `baton_t`).
#define BATON_LOCKED(type, name, params, args)             \
    static type baton_##name params {                      \
        baton_t *b = io->private_data;                     \
        pthread_mutex_lock(&b->lock);                      \
        type result = name##_locked args;                  \
        pthread_mutex_unlock(&b->lock);                    \
        return result;                                     \
    }
BATON_LOCKED(int, start, (snd_pcm_ioplug_t *io), (io))
BATON_LOCKED(int, stop, (snd_pcm_ioplug_t *io), (io))
BATON_LOCKED(snd_pcm_sframes_t, pointer, (snd_pcm_ioplug_t *io), (io))
BATON_LOCKED(snd_pcm_sframes_t, transfer,
             (snd_pcm_ioplug_t *io, const snd_pcm_channel_area_t *areas, snd_pcm_uframes_t offset,
              snd_pcm_uframes_t size),
             (io, areas, offset, size))
BATON_LOCKED(int, delay, (snd_pcm_ioplug_t *io, snd_pcm_sframes_t *delay), (io, delay))
BATON_LOCKED(int, prepare, (snd_pcm_ioplug_t *io), (io))
BATON_LOCKED(int, drain, (snd_pcm_ioplug_t *io), (io))
BATON_LOCKED(int, hw_params, (snd_pcm_ioplug_t *io, snd_pcm_hw_params_t *params), (io, params))
BATON_LOCKED(int, sw_params, (snd_pcm_ioplug_t *io, snd_pcm_sw_params_t *params), (io, params))
BATON_LOCKED(int, poll_revents,
             (snd_pcm_ioplug_t *io, struct pollfd *pfd, unsigned int nfds, unsigned short *revents),
             (io, pfd, nfds, revents))

static const snd_pcm_ioplug_callback_t baton_callbacks = {
    .start = baton_start,
    .stop = baton_stop,
    .pointer = baton_pointer,
    .transfer = baton_transfer,
    .close = baton_close,
    .hw_params = baton_hw_params,
    .sw_params = baton_sw_params,
    .prepare = baton_prepare,
    .drain = baton_drain,
    .poll_descriptors_count = baton_poll_descriptors_count,
    .poll_descriptors = baton_poll_descriptors,
    .poll_revents = baton_poll_revents,
    .delay = baton_delay,
};

// MARK: - Open

static int set_constraints(baton_t *b) {
    static const unsigned int access[] = {SND_PCM_ACCESS_RW_INTERLEAVED, SND_PCM_ACCESS_MMAP_INTERLEAVED};
    static const unsigned int formats[] = {SND_PCM_FORMAT_S16_LE, SND_PCM_FORMAT_S32_LE, SND_PCM_FORMAT_FLOAT_LE};
    snd_pcm_ioplug_t *io = &b->io;
    int err;
    if ((err = snd_pcm_ioplug_set_param_list(io, SND_PCM_IOPLUG_HW_ACCESS, 2, access)) < 0) return err;
    if ((err = snd_pcm_ioplug_set_param_list(io, SND_PCM_IOPLUG_HW_FORMAT, 3, formats)) < 0) return err;
    if ((err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_CHANNELS, 1, 8)) < 0) return err;
    if ((err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_RATE, 8000, 384000)) < 0) return err;
    if ((err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_PERIOD_BYTES, 128, 1 << 20)) < 0) return err;
    if ((err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_PERIODS, 2, 1024)) < 0) return err;
    return snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_BUFFER_BYTES, 256, 4 << 20);
}

/// The errno for batond's refusal at open (its ERROR sentence in `b->error`): -EBUSY when it has too
/// many connections or is stopping ("…; try again later", or the bare "batond is stopping" of an
/// older batond: a program that retries on busy gets in, to the batond that follows),
/// else -ENOENT (no such source). Every refusal was -ENOENT: "No such file or directory" for a busy
/// batond, and a player opening during `systemctl restart batond` gave up as if nothing were there.
static int open_refusal(const baton_t *b) {
    return strstr(b->error, "try again later") || strstr(b->error, "batond is stopping") ? -EBUSY : -ENOENT;
}

/// Connects and sends OPEN: 0, or -errno with one line on stderr.
static int connect_to_batond(baton_t *b) {
    b->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (b->fd < 0) return -errno;
    // Before the connect, which waits under it too: a batond alive but not accepting (stopped,
    // stuck, out of descriptors) with its backlog full held snd_pcm_open for ever — MPD's output
    // thread at each retry.
    struct timeval timeout = {.tv_sec = SEND_TIMEOUT_S};
    setsockopt(b->fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    memcpy(address.sun_path, b->socket_path, strlen(b->socket_path) + 1);
    if (connect(b->fd, (struct sockaddr *)&address, sizeof address) < 0) {
        int e = errno;
        if (e == EAGAIN || e == EWOULDBLOCK) {
            fprintf(stderr,
                    "baton: batond at %s did not take the connection for source \"%s\" within %d s (busy or "
                    "stuck); try again later\n",
                    b->socket_path, b->source, SEND_TIMEOUT_S);
            return -EBUSY;
        }
        // Permission denied is the socket's mode (0660, group audio) or a directory on its path, not
        // batond being away: "is batond running?" sent the user to a batond that was running.
        const char *hint = e == EACCES || e == EPERM ? "is this user in the socket's group?" : "is batond running?";
        fprintf(stderr, "baton: cannot reach batond at %s for source \"%s\": %s (%s)\n", b->socket_path, b->source,
                strerror(e), hint);
        return e == ENOENT ? -ECONNREFUSED : -e;
    }
    uint32_t version = BATON_PCM_PROTOCOL_VERSION;
    int err = send_message(b, BATON_MSG_OPEN, &version, sizeof version, b->source, strlen(b->source));
    if (err < 0) {
        // batond may have refused at once (too many connections) and closed before OPEN went out:
        // the ERROR it sent first is still there to read.
        b->dead = false;
        b->got_error = false;
        read_input(b, 0);
        b->dead = true;
        if (b->got_error) {
            fprintf(stderr, "baton: batond at %s refused source \"%s\" (at open): %s\n", b->socket_path, b->source,
                    b->error);
            return open_refusal(b);
        }
        fprintf(stderr, "baton: batond at %s closed the connection at once (source \"%s\")\n", b->socket_path,
                b->source);
        return -ECONNREFUSED;
    }
    err = await_reply(b, "at open", -ENOENT);
    return err == -ENOENT ? open_refusal(b) : err;
}

static int parse_definition(baton_t *b, snd_config_t *conf) {
    snd_config_iterator_t i, next;
    snd_config_for_each(i, next, conf) {
        snd_config_t *n = snd_config_iterator_entry(i);
        const char *id, *s;
        if (snd_config_get_id(n, &id) < 0) continue;
        if (strcmp(id, "comment") == 0 || strcmp(id, "type") == 0 || strcmp(id, "hint") == 0) continue;
        if (strcmp(id, "source") == 0 || strcmp(id, "socket") == 0) {
            bool is_source = strcmp(id, "source") == 0;
            size_t capacity = is_source ? sizeof b->source : sizeof b->socket_path;
            if (snd_config_get_string(n, &s) < 0 || strlen(s) == 0 || strlen(s) >= capacity) {
                SNDERR("baton: %s must be a string of 1 to %zu bytes", id, capacity - 1);
                return -EINVAL;
            }
            strcpy(is_source ? b->source : b->socket_path, s);
        } else {
            SNDERR("baton: unknown field %s (expected source, socket)", id);
            return -EINVAL;
        }
    }
    if (!*b->source) {
        SNDERR("baton: missing field source (the external source's name in batond's config)");
        return -EINVAL;
    }
    return 0;
}

SND_PCM_PLUGIN_DEFINE_FUNC(baton) {
    (void)root;
    if (stream != SND_PCM_STREAM_PLAYBACK) {
        SNDERR("baton: playback only");
        return -EINVAL;
    }
    baton_t *b = calloc(1, sizeof *b);
    if (!b) return -ENOMEM;
    b->fd = -1;
    b->avail_min = 1;
    b->ready_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (b->ready_fd < 0) {
        int e = errno;
        free(b);
        return -e;
    }
    pthread_mutex_init(&b->lock, NULL);
    strcpy(b->socket_path, BATON_PCM_DEFAULT_SOCKET);
    int err = parse_definition(b, conf);
    if (err == 0) {
        pthread_mutex_lock(&b->lock);   // read_input lets go of it while it waits
        err = connect_to_batond(b);
        pthread_mutex_unlock(&b->lock);
    }
    if (err < 0) {
        if (b->fd >= 0) close(b->fd);
        close(b->ready_fd);
        pthread_mutex_destroy(&b->lock);
        free(b);
        return err;
    }
    b->io.version = SND_PCM_IOPLUG_VERSION;
    b->io.name = "Baton external source";
    b->io.callback = &baton_callbacks;
    b->io.private_data = b;
    b->io.flags = SND_PCM_IOPLUG_FLAG_BOUNDARY_WA | SND_PCM_IOPLUG_FLAG_MONOTONIC;
    b->io.poll_fd = b->fd;
    b->io.poll_events = POLLIN;
    b->io.mmap_rw = 0;
    err = snd_pcm_ioplug_create(&b->io, name, stream, mode);
    if (err < 0) {
        close(b->fd);
        close(b->ready_fd);
        pthread_mutex_destroy(&b->lock);
        free(b);
        return err;
    }
    // alsa-lib sets `nonblock` only when the program calls snd_pcm_nonblock, not from the open
    // mode: a program that opened the device non-blocking read as blocking, and its drain waited
    // (see baton_drain). Set from the mode here; snd_pcm_nonblock changes it as before (MPD opens
    // in mode 0, then calls it).
    b->io.nonblock = (mode & SND_PCM_NONBLOCK) ? 1 : 0;
    err = set_constraints(b);
    if (err < 0) {
        snd_pcm_ioplug_delete(&b->io);   // calls baton_close, which frees b
        return err;
    }
    *pcmp = b->io.pcm;
    return 0;
}

SND_PCM_PLUGIN_SYMBOL(baton);
