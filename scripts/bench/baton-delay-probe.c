// baton-delay-probe: how true is the `baton` PCM's snd_pcm_delay? (scripts/bench-external.sh)
//
// Plays S16 stereo at RATE to PCM for about 6 s: silence, then steps of a constant level every
// 0.5 s. Just before writing each step's first frame it prints "step CLOCK_MONOTONIC-ns DELAY-frames":
// that frame should be heard DELAY frames later. The script finds when the card really took it.
//   cc -O2 -o baton-delay-probe baton-delay-probe.c -lasound ; baton-delay-probe PCM RATE PERIOD BUFFER
#include <alsa/asoundlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: baton-delay-probe PCM RATE PERIOD BUFFER\n"); return 2; }
    unsigned rate = (unsigned)atoi(argv[2]);
    snd_pcm_uframes_t period = (snd_pcm_uframes_t)atoi(argv[3]), buffer = (snd_pcm_uframes_t)atoi(argv[4]);
    snd_pcm_t *pcm;
    int err = snd_pcm_open(&pcm, argv[1], SND_PCM_STREAM_PLAYBACK, 0);
    if (err < 0) { fprintf(stderr, "open %s: %s\n", argv[1], snd_strerror(err)); return 1; }
    snd_pcm_hw_params_t *hw;
    snd_pcm_hw_params_alloca(&hw);
    snd_pcm_hw_params_any(pcm, hw);
    snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED);
    snd_pcm_hw_params_set_format(pcm, hw, SND_PCM_FORMAT_S16_LE);
    snd_pcm_hw_params_set_channels(pcm, hw, 2);
    snd_pcm_hw_params_set_rate(pcm, hw, rate, 0);
    snd_pcm_hw_params_set_period_size_near(pcm, hw, &period, 0);
    snd_pcm_hw_params_set_buffer_size_near(pcm, hw, &buffer);
    if ((err = snd_pcm_hw_params(pcm, hw)) < 0) { fprintf(stderr, "hw_params: %s\n", snd_strerror(err)); return 1; }
    printf("setup %u %lu %lu\n", rate, period, buffer);
    short *block = calloc(period * 2, sizeof *block);
    unsigned long written = 0, step_every = rate / 2, level = 0;
    for (int k = 0; k < 12; k++) {
        for (unsigned long f = 0; f < step_every; f += period) {
            if (f == 0 && k >= 2) {
                level = level ? 0 : 16000;
                snd_pcm_sframes_t delay = 0;
                struct timespec t;
                snd_pcm_delay(pcm, &delay);
                clock_gettime(CLOCK_MONOTONIC, &t);
                printf("step %lld %ld %lu %lu\n", (long long)t.tv_sec * 1000000000LL + t.tv_nsec, (long)delay,
                       written, level);
            }
            for (unsigned long i = 0; i < period * 2; i++) block[i] = (short)level;
            snd_pcm_sframes_t n = snd_pcm_writei(pcm, block, period);
            if (n < 0) n = snd_pcm_recover(pcm, (int)n, 0);
            if (n < 0) { fprintf(stderr, "write: %s\n", snd_strerror((int)n)); return 1; }
            written += (unsigned long)n;
        }
    }
    snd_pcm_drain(pcm);
    snd_pcm_close(pcm);
    return 0;
}
