#include "BenchFloor.h"
#include <math.h>
#include <samplerate.h>
#include <soxr.h>
#include <stdlib.h>
#include <time.h>

static double thread_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

enum { IN = 480, OUT = 460, CH = 2 };

static void fill(float *block, int source, long frame) {
    for (int i = 0; i < IN; i++) {
        float v = 0.3f * sinf(2.0f * (float)M_PI * (220.0f * (source + 1)) * (float)(frame + i) / 48000.0f);
        block[2 * i] = v;
        block[2 * i + 1] = v;
    }
}

double baton_floor_soxr_hq(int sources, int seconds) {
    soxr_t s[16];
    soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
    for (int k = 0; k < sources; k++) {
        soxr_error_t e = NULL;
        s[k] = soxr_create(48000, 44100, CH, &e, &io, &q, NULL);
        if (e) return -1;
    }
    float in[IN * CH], out[(OUT + 64) * CH];
    double start = thread_seconds();
    for (long block = 0; block < (long)seconds * 100; block++) {
        for (int k = 0; k < sources; k++) {
            fill(in, k, block * IN);
            size_t done = 0, produced = 0;
            soxr_process(s[k], in, IN, &done, out, OUT + 64, &produced);
        }
    }
    double spent = thread_seconds() - start;
    for (int k = 0; k < sources; k++) soxr_delete(s[k]);
    return spent;
}

double baton_floor_samplerate(int sources, int seconds, int converter) {
    SRC_STATE *s[16];
    for (int k = 0; k < sources; k++) {
        int e = 0;
        s[k] = src_new(converter, CH, &e);
        if (!s[k]) return -1;
    }
    float in[IN * CH], out[(OUT + 64) * CH];
    double start = thread_seconds();
    for (long block = 0; block < (long)seconds * 100; block++) {
        for (int k = 0; k < sources; k++) {
            fill(in, k, block * IN);
            SRC_DATA d = { in, out, IN, OUT + 64, 0, 0, 0, 44100.0 / 48000.0 };
            src_process(s[k], &d);
        }
    }
    double spent = thread_seconds() - start;
    for (int k = 0; k < sources; k++) src_delete(s[k]);
    return spent;
}
