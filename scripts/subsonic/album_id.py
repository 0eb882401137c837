"""Prints the ID of the album named NAME on the Subsonic server at URL (exit 1 when none).

Usage: album_id.py URL USER PASSWORD_FILE NAME
Used by scripts/run.sh to play the demo album; talks to 127.0.0.1 only.
"""
import binascii
import json
import sys
import urllib.parse
import urllib.request

url, user, password_file, name = sys.argv[1:5]
with open(password_file, encoding="utf-8") as f:
    password = f.read().strip()
query = urllib.parse.urlencode({
    "u": user,
    "p": "enc:" + binascii.hexlify(password.encode("utf-8")).decode("ascii"),
    "v": "1.12.0",
    "c": "baton-script",
    "f": "json",
    "query": name,
    "artistCount": 0,
    "songCount": 0,
})
with urllib.request.urlopen(f"{url}/rest/search3.view?{query}", timeout=5) as r:
    body = json.load(r)
albums = body.get("subsonic-response", {}).get("searchResult3", {}).get("album", [])
for album in albums:
    if album.get("name") == name:
        print(album["id"])
        sys.exit(0)
sys.exit(1)
