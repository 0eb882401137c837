"""Exits 0 when the Subsonic server at URL answers `ping` with status "ok" for USER.

Usage: ping.py URL USER PASSWORD_FILE
Used by subsonic-server.sh to wait for the server; talks to 127.0.0.1 only.
"""
import sys

from api import call

url, user, password_file = sys.argv[1:4]
try:
    body = call(url, user, password_file, "ping", timeout=2)
except Exception:
    sys.exit(1)
sys.exit(0 if body.get("status") == "ok" else 1)
