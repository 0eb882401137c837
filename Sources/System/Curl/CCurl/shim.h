#pragma once
#include <curl/curl.h>

// curl_easy_setopt and curl_easy_getinfo are C-variadic, which Swift does not import. Each shim below
// is one typed call of them, named after the argument kind it passes.

/// curl_easy_setopt with a `long` argument (CURLOPT_NOSIGNAL, CURLOPT_TIMEOUT_MS, ...).
static inline CURLcode baton_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

/// curl_easy_setopt with a `curl_off_t` argument (CURLOPT_RESUME_FROM_LARGE, ...).
static inline CURLcode baton_curl_setopt_off(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

/// curl_easy_setopt with a string argument (CURLOPT_URL, CURLOPT_USERAGENT, ...); libcurl copies it.
static inline CURLcode baton_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

/// curl_easy_setopt with a data pointer (CURLOPT_WRITEDATA, CURLOPT_HEADERDATA, CURLOPT_XFERINFODATA).
static inline CURLcode baton_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

/// curl_easy_setopt with a header list (CURLOPT_HTTPHEADER); the list must outlive the transfer.
static inline CURLcode baton_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

/// curl_easy_setopt(CURLOPT_WRITEFUNCTION or CURLOPT_HEADERFUNCTION, callback): both take this type.
static inline CURLcode baton_curl_setopt_write_callback(CURL *handle, CURLoption option,
                                                        curl_write_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

/// curl_easy_setopt(CURLOPT_XFERINFOFUNCTION, callback).
static inline CURLcode baton_curl_setopt_xferinfo_callback(CURL *handle, curl_xferinfo_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, callback);
}

/// curl_easy_getinfo for a `long` (CURLINFO_RESPONSE_CODE, ...).
static inline CURLcode baton_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

/// curl_easy_getinfo for a `curl_off_t` (CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, ...).
static inline CURLcode baton_curl_getinfo_off(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

/// CURL_GLOBAL_DEFAULT as a long: the macro is an expression Swift imports with a different type.
static inline long baton_curl_global_default(void) { return CURL_GLOBAL_DEFAULT; }
