#pragma once
// The `baton` ALSA PCM type: an alsa-lib ioplug plugin (libasound_module_pcm_baton.so) that hands a
// program's frames to batond over a Unix stream socket, paced by what batond consumes.
//
//   pcm_type.baton { lib "/usr/lib/.../alsa-lib/libasound_module_pcm_baton.so" }   (or the plugin dir)
//   pcm.baton_airplay { type baton  source "airplay"  socket "/run/baton/sources.sock" }
//
// The wire protocol (docs/EXTERNAL.md, "The protocol") is spoken by this plugin and by batond's
// ExternalSourceServer (Sources/Players/ExternalSourceServer.swift); the constants below are its
// definition. Every message is an 8-byte header {u32 type, u32 payload bytes} in host byte order
// (both ends are on one machine), then the payload.

#define BATON_PCM_PROTOCOL_VERSION 1u
#define BATON_PCM_DEFAULT_SOCKET "/run/baton/sources.sock"

enum baton_pcm_message {
    BATON_MSG_OPEN = 1,      // C→S: u32 version, then the source name (UTF-8, no NUL)
    BATON_MSG_OK = 2,        // S→C: the last OPEN or FORMAT is accepted (no payload)
    BATON_MSG_ERROR = 3,     // S→C: refused or failed: a sentence (UTF-8); the server closes after it
    BATON_MSG_FORMAT = 4,    // C→S: u32 format (0 S16_LE, 1 S32_LE, 2 FLOAT_LE), channels, rate, buffer, period
    BATON_MSG_DATA = 5,      // C→S: interleaved frames in the last FORMAT
    BATON_MSG_DRAIN = 6,     // C→S: tell me when everything sent was played
    BATON_MSG_DRAINED = 7,   // S→C: everything sent before the DRAIN was played
    BATON_MSG_POSITION = 8,  // S→C: u64 frames consumed since OPEN, u64 frames between them and the speaker
    BATON_MSG_DROP = 9,      // C→S: discard what is not consumed yet (snd_pcm_drop)
};

enum baton_pcm_format { BATON_FORMAT_S16_LE = 0, BATON_FORMAT_S32_LE = 1, BATON_FORMAT_FLOAT_LE = 2 };
