#pragma once
#include <opus.h>
#include <opus_multistream.h>

// opus_encoder_ctl is C-variadic, which Swift does not import: one typed wrapper per argument kind.
// `request` is an OPUS_SET_*_REQUEST / OPUS_GET_*_REQUEST constant (plain integers in Swift).
static inline int baton_opus_encoder_set_int(OpusEncoder *encoder, int request, opus_int32 value) {
    return opus_encoder_ctl(encoder, request, value);
}
static inline int baton_opus_encoder_get_int(OpusEncoder *encoder, int request, opus_int32 *value) {
    return opus_encoder_ctl(encoder, request, value);
}

// The same for the decoders (variadic too): setting a single-stream decoder's gain to what
// libopusfile set on its multistream decoder (OpusLinkDecoder).
static inline int baton_opus_decoder_set_int(OpusDecoder *decoder, int request, opus_int32 value) {
    return opus_decoder_ctl(decoder, request, value);
}
static inline int baton_opus_decoder_reset(OpusDecoder *decoder) {
    return opus_decoder_ctl(decoder, OPUS_RESET_STATE);
}
static inline int baton_opus_multistream_decoder_get_int(OpusMSDecoder *decoder, int request, opus_int32 *value) {
    return opus_multistream_decoder_ctl(decoder, request, value);
}
