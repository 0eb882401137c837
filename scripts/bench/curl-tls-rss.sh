#!/usr/bin/env bash
# What libcurl's TLS costs in resident memory (issue 15, RSS): a tiny C program linked against
# Debian's libcurl4 (OpenSSL) and against libcurl3-gnutls, each run with and without
# curl_global_init, prints the resident KiB of the TLS libraries and of the whole process.
# It answers whether "a TLS library loaded only for an https server" or the other libcurl flavour
# would shrink batond: see docs/PERFORMANCE.md, "What the resident memory is".
#
#   scripts/bench/curl-tls-rss.sh          needs gcc, libcurl4-openssl-dev and libcurl3-gnutls
set -euo pipefail
work="$(mktemp -d /tmp/baton-curl-tls.XXXXXX)"
trap 'rm -rf "$work"' EXIT
cat >"$work/probe.c" <<'C'
#include <curl/curl.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
  if (argc > 1) curl_global_init(strcmp(argv[1], "nothing") == 0 ? CURL_GLOBAL_NOTHING : CURL_GLOBAL_DEFAULT);
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[512], file[256] = "";
  long crypto = 0, ssl = 0, gnutls = 0, curl = 0, total = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b; char perms[8], path[256] = "";
    if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %255s", &a, &b, perms, path) >= 3 && strchr(line, '-') < strchr(line, ' ')) {
      strcpy(file, path); continue;
    }
    long kib;
    if (sscanf(line, "Rss: %ld kB", &kib) == 1) {
      total += kib;
      if (strstr(file, "libcrypto.so")) crypto += kib;
      else if (strstr(file, "libssl.so")) ssl += kib;
      else if (strstr(file, "libgnutls.so")) gnutls += kib;
      else if (strstr(file, "libcurl")) curl += kib;
    }
  }
  printf("%-22s libcrypto %5ld  libssl %4ld  gnutls %5ld  libcurl %4ld  process %5ld KiB\n",
         argc > 1 ? (strcmp(argv[1], "nothing") == 0 ? "CURL_GLOBAL_NOTHING" : "CURL_GLOBAL_DEFAULT") : "loaded, no init",
         crypto, ssl, gnutls, curl, total);
  return 0;
}
C
lib=/usr/lib/$(gcc -print-multiarch)
gcc -O1 "$work/probe.c" -o "$work/openssl" -lcurl
gcc -O1 "$work/probe.c" -o "$work/gnutls" "$lib/libcurl-gnutls.so.4"
echo "libcurl $(dpkg-query -W -f '${Version}' libcurl4 2>/dev/null), libssl3 $(dpkg-query -W -f '${Version}' libssl3 2>/dev/null), libgnutls30 $(dpkg-query -W -f '${Version}' libgnutls30 2>/dev/null); resident KiB"
for flavour in openssl gnutls; do
  echo "libcurl ($flavour):"
  for how in "" nothing default; do
    printf '  '; "$work/$flavour" $how
  done
done
