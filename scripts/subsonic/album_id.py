"""Prints the ID of the album named NAME on the Subsonic server at URL (exit 1, saying why, when
there is none or the server cannot be asked).

Usage: album_id.py URL USER PASSWORD_FILE NAME
Used by scripts/run.sh to play the demo album; talks to 127.0.0.1 only.
"""
import sys

from api import call

if len(sys.argv) != 5:
    sys.exit("usage: album_id.py URL USER PASSWORD_FILE NAME")
url, user, password_file, name = sys.argv[1:5]
try:
    body = call(url, user, password_file, "search3", query=name, artistCount=0, songCount=0)
except (OSError, ValueError) as e:
    sys.exit(f"album_id.py: cannot search {url} for the album {name!r}: {e}")
if body.get("status") != "ok":
    sys.exit(f"album_id.py: {url} refused the search for {name!r}: {body.get('error', body)}")
albums = body.get("searchResult3", {}).get("album", [])
for album in albums:
    if album.get("name") == name:
        print(album["id"])
        sys.exit(0)
found = ", ".join(repr(a.get("name")) for a in albums) or "none"
sys.exit(f"album_id.py: {url} has no album named {name!r} (the search found: {found})")
