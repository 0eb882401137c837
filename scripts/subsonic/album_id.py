"""Prints the ID of the album named NAME on the Subsonic server at URL (exit 1 when none).

Usage: album_id.py URL USER PASSWORD_FILE NAME
Used by scripts/run.sh to play the demo album; talks to 127.0.0.1 only.
"""
import sys

from api import call

url, user, password_file, name = sys.argv[1:5]
body = call(url, user, password_file, "search3", query=name, artistCount=0, songCount=0)
for album in body.get("searchResult3", {}).get("album", []):
    if album.get("name") == name:
        print(album["id"])
        sys.exit(0)
sys.exit(1)
