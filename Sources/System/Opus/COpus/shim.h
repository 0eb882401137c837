#pragma once
#include <opus.h>

// opus_encoder_ctl is C-variadic, which Swift does not import: one typed wrapper per argument kind.
// `request` is an OPUS_SET_*_REQUEST / OPUS_GET_*_REQUEST constant (plain integers in Swift).
static inline int baton_opus_encoder_set_int(OpusEncoder *encoder, int request, opus_int32 value) {
    return opus_encoder_ctl(encoder, request, value);
}
static inline int baton_opus_encoder_get_int(OpusEncoder *encoder, int request, opus_int32 *value) {
    return opus_encoder_ctl(encoder, request, value);
}
