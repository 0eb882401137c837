"""Exits 0 when the Subsonic server at URL answers `ping` with status "ok" for USER.

Usage: ping.py URL USER PASSWORD_FILE
Used by subsonic-server.sh to wait for the server; talks to 127.0.0.1 only.
"""
import binascii
import json
import sys
import urllib.parse
import urllib.request

url, user, password_file = sys.argv[1:4]
with open(password_file, encoding="utf-8") as f:
    password = f.read().strip()
query = urllib.parse.urlencode({
    "u": user,
    "p": "enc:" + binascii.hexlify(password.encode("utf-8")).decode("ascii"),
    "v": "1.12.0",
    "c": "baton-script",
    "f": "json",
})
try:
    with urllib.request.urlopen(f"{url}/rest/ping.view?{query}", timeout=2) as r:
        body = json.load(r)
except Exception:
    sys.exit(1)
sys.exit(0 if body.get("subsonic-response", {}).get("status") == "ok" else 1)
