// The minimal C music pipeline, the floor for `baton-bench --pipeline` and scripts/bench-pipelines.sh:
// one thread, HTTP GET on a plain socket (or a file) → opusfile (packets decoded by libopus's
// single-stream decoder, as in the daemon) → gain → libsoxr / libsamplerate →
// S16 → snd_pcm_writei. No buffering beyond the libraries' own, no threads, no mixing. Built into
// baton-bench (`--floor`) and, with -DBATON_FLOOR_MAIN, as a standalone program (the script does
// that, so its peak RSS carries no Swift runtime).
#include "BenchFloor.h"
#include <alsa/asoundlib.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <ogg/ogg.h>
#include <opus/opus.h>
#include <samplerate.h>
#include <soxr.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

// opusfile's API (opusfile.h is not on the default include path; these match libopusfile 0.12).
typedef struct OggOpusFile OggOpusFile;
typedef struct {
    int (*read)(void *stream, unsigned char *ptr, int nbytes);
    int (*seek)(void *stream, int64_t offset, int whence);
    int64_t (*tell)(void *stream);
    int (*close)(void *stream);
} OpusFileCallbacks;
OggOpusFile *op_open_callbacks(void *stream, const OpusFileCallbacks *cb, const unsigned char *initial_data,
                               size_t initial_bytes, int *error);
int op_read_float(OggOpusFile *of, float *pcm, int buf_size, int *li);
int op_channel_count(const OggOpusFile *of, int li);
void op_free(OggOpusFile *of);
#define OP_HOLE (-3)
// Packets are decoded by libopus's single-stream decoder, as the daemon decodes them (OpusLinkDecoder):
// libopusfile's own opus_multistream_decode_float runs `cpuid` four times a packet in Debian's libopus
// (docs/PERFORMANCE.md), which would make this floor costlier than the pipeline it is the floor of.
// The bench stream is one stereo link whose header gain is 0, so one decoder at gain 0 is libopusfile's.
typedef struct OpusMSDecoder OpusMSDecoder;
typedef int (*op_decode_cb_func)(void *ctx, OpusMSDecoder *decoder, void *pcm, const ogg_packet *op, int nsamples,
                                 int nchannels, int format, int li);
void op_set_decode_callback(OggOpusFile *of, op_decode_cb_func cb, void *ctx);
#define OP_DEC_FORMAT_FLOAT (7040)
#define OP_DEC_USE_DEFAULT (6720)

typedef struct {
    int fd;
    int is_socket;
    unsigned char head[4096];  // body bytes read together with the HTTP head
    int head_len, head_pos;
} source_t;

static int source_read(void *stream, unsigned char *ptr, int nbytes) {
    source_t *s = stream;
    if (s->head_pos < s->head_len) {
        int n = s->head_len - s->head_pos < nbytes ? s->head_len - s->head_pos : nbytes;
        memcpy(ptr, s->head + s->head_pos, n);
        s->head_pos += n;
        return n;
    }
    for (;;) {
        ssize_t n = s->is_socket ? recv(s->fd, ptr, nbytes, 0) : read(s->fd, ptr, nbytes);
        if (n < 0 && errno == EINTR) continue;
        return n < 0 ? -1 : (int)n;
    }
}

// http://IPv4:port/path or a file path.
static int source_open(source_t *s, const char *target) {
    memset(s, 0, sizeof *s);
    if (strncmp(target, "http://", 7) != 0) {
        s->fd = open(target, O_RDONLY);
        return s->fd < 0 ? -1 : 0;
    }
    char host[64] = {0};
    const char *h = target + 7, *colon = strchr(h, ':'), *slash = strchr(h, '/');
    if (!slash) slash = h + strlen(h);
    const char *host_end = colon && colon < slash ? colon : slash;
    if (host_end - h >= (long)sizeof host) return -1;
    memcpy(host, h, host_end - h);
    int port = colon && colon < slash ? atoi(colon + 1) : 80;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) return -1;
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    s->is_socket = 1;
    if (connect(s->fd, (struct sockaddr *)&a, sizeof a) != 0) return -1;
    char req[1024];
    int len = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %.*s\r\nConnection: close\r\n\r\n",
                       *slash ? slash : "/", (int)(slash - h), h);
    if (send(s->fd, req, len, 0) != len) return -1;
    int got = 0;
    for (;;) {
        ssize_t n = recv(s->fd, s->head + got, sizeof s->head - got, 0);
        if (n <= 0) return -1;
        got += n;
        for (int i = 0; i + 3 < got; i++) {
            if (memcmp(s->head + i, "\r\n\r\n", 4) == 0) {
                if (strncmp((char *)s->head + 8, " 200", 4) != 0) return -1;
                s->head_pos = i + 4;
                s->head_len = got;
                return 0;
            }
        }
        if (got == (int)sizeof s->head) return -1;
    }
}

static double rusage_cpu(long *maxrss_kib) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    if (maxrss_kib) *maxrss_kib = u.ru_maxrss;
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

enum { CH = 2, IN_RATE = 48000, OUT_RATE = 44100, MAX_IN = 5760, MAX_OUT = MAX_IN * OUT_RATE / IN_RATE + 256 };

static long frames_out = 0;

static int write_s16(snd_pcm_t *pcm, const float *samples, long frames) {
    static int16_t s16[MAX_OUT * CH];
    for (long i = 0; i < frames * CH; i++) {
        float v = samples[i] * 32767.0f;
        v = v > 32767.0f ? 32767.0f : (v < -32767.0f ? -32767.0f : v);
        s16[i] = (int16_t)lrintf(v);
    }
    long done = 0;
    while (done < frames) {
        snd_pcm_sframes_t w = snd_pcm_writei(pcm, s16 + done * CH, frames - done);
        if (w < 0) {
            if (snd_pcm_recover(pcm, (int)w, 1) < 0) return -1;
            continue;
        }
        done += w;
    }
    frames_out += frames;
    return 0;
}

static int decode_packet(void *ctx, OpusMSDecoder *decoder, void *pcm, const ogg_packet *op, int nsamples,
                         int nchannels, int format, int li) {
    (void)decoder;
    (void)li;
    OpusDecoder *dec = ctx;
    if (format != OP_DEC_FORMAT_FLOAT || nchannels != CH) return OP_DEC_USE_DEFAULT;
    int n = opus_decode_float(dec, op->packet, (opus_int32)op->bytes, pcm, nsamples, 0);
    return n == nsamples ? 0 : (n < 0 ? n : OPUS_INVALID_PACKET);
}

int baton_floor_pipeline(const char *target, const char *converter, const char *device, double gain, int report) {
    int soxr_recipe = -1, src_type = -1;
    if (!strcmp(converter, "soxr-hq")) soxr_recipe = SOXR_HQ;
    else if (!strcmp(converter, "soxr-vhq")) soxr_recipe = SOXR_VHQ;
    else if (!strcmp(converter, "soxr-mq")) soxr_recipe = SOXR_MQ;
    else if (!strcmp(converter, "soxr-lq")) soxr_recipe = SOXR_LQ;
    else if (!strcmp(converter, "src-best")) src_type = SRC_SINC_BEST_QUALITY;
    else if (!strcmp(converter, "src-medium")) src_type = SRC_SINC_MEDIUM_QUALITY;
    else if (!strcmp(converter, "src-fastest")) src_type = SRC_SINC_FASTEST;
    else { fprintf(stderr, "floor: unknown converter %s\n", converter); return 2; }

    source_t src;
    if (source_open(&src, target) != 0) { fprintf(stderr, "floor: cannot open %s\n", target); return 1; }
    OpusFileCallbacks cb = { source_read, NULL, NULL, NULL };
    int err = 0;
    OggOpusFile *of = op_open_callbacks(&src, &cb, NULL, 0, &err);
    if (!of || op_channel_count(of, -1) != CH) { fprintf(stderr, "floor: not stereo Ogg Opus (%d)\n", err); return 1; }
    OpusDecoder *dec = opus_decoder_create(IN_RATE, CH, &err);
    if (!dec) { fprintf(stderr, "floor: opus_decoder_create: %d\n", err); return 1; }
    op_set_decode_callback(of, decode_packet, dec);

    snd_pcm_t *pcm = NULL;
    if (snd_pcm_open(&pcm, device, SND_PCM_STREAM_PLAYBACK, 0) < 0 ||
        snd_pcm_set_params(pcm, SND_PCM_FORMAT_S16_LE, SND_PCM_ACCESS_RW_INTERLEAVED, CH, OUT_RATE, 0, 40000) < 0) {
        fprintf(stderr, "floor: cannot open ALSA %s\n", device);
        return 1;
    }
    soxr_t sox = NULL;
    SRC_STATE *rabbit = NULL;
    if (soxr_recipe >= 0) {
        soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
        soxr_quality_spec_t q = soxr_quality_spec(soxr_recipe, 0);
        soxr_error_t e = NULL;
        sox = soxr_create(IN_RATE, OUT_RATE, CH, &e, &io, &q, NULL);
        if (e) return 1;
    } else {
        int e = 0;
        rabbit = src_new(src_type, CH, &e);
        if (!rabbit) return 1;
    }

    static float in[MAX_IN * CH], out[MAX_OUT * CH];
    float g = (float)gain;
    long frames_in = 0;
    for (;;) {
        int n = op_read_float(of, in, MAX_IN * CH, NULL);
        if (n == OP_HOLE) continue;
        if (n < 0) { fprintf(stderr, "floor: decode error %d\n", n); return 1; }
        int last = n == 0;
        frames_in += n;
        for (int i = 0; i < n * CH; i++) in[i] *= g;
        if (sox) {
            size_t produced = 0;
            do {
                soxr_process(sox, last ? NULL : in, last ? 0 : (size_t)n, NULL, out, MAX_OUT, &produced);
                if (write_s16(pcm, out, (long)produced) < 0) return 1;
            } while (last && produced > 0);
        } else {
            SRC_DATA d = { in, out, n, MAX_OUT, 0, 0, last, (double)OUT_RATE / IN_RATE };
            for (;;) {
                if (src_process(rabbit, &d) != 0) return 1;
                if (write_s16(pcm, out, d.output_frames_gen) < 0) return 1;
                d.data_in += d.input_frames_used * CH;
                d.input_frames -= d.input_frames_used;
                if (d.input_frames == 0 && (!last || d.output_frames_gen == 0)) break;
            }
        }
        if (last) break;
    }
    snd_pcm_drain(pcm);
    snd_pcm_close(pcm);
    op_free(of);
    opus_decoder_destroy(dec);
    if (sox) soxr_delete(sox);
    if (rabbit) src_delete(rabbit);
    close(src.fd);
    if (report) {
        long rss = 0;
        double cpu = rusage_cpu(&rss), audio = (double)frames_out / OUT_RATE;
        printf("floor (C: opusfile → %s → S16 → snd_pcm_writei %s, gain %.2f): %.2f s of audio (%ld frames in)\n"
               "  process CPU: %.3f s = %.5f s per audio second (%.1f× real time)\n  peak RSS: %.1f MiB\n",
               converter, device, gain, audio, frames_in, cpu, cpu / audio, audio / cpu, rss / 1024.0);
    }
    return 0;
}

#ifdef BATON_FLOOR_MAIN
int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s URL|PATH soxr-hq|soxr-vhq|src-medium|src-fastest [DEVICE [GAIN]]\n", argv[0]);
        return 2;
    }
    return baton_floor_pipeline(argv[1], argv[2], argc > 3 ? argv[3] : "null", argc > 4 ? atof(argv[4]) : 0.8, 1);
}
#endif
