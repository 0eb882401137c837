"""Adds an ID3 tag (in an `id3 ` chunk) to a WAV file, the only WAV tag form Supysonic reads.

Usage: tag_wav.py FILE ARTIST ALBUM TITLE TRACK
(ffmpeg writes WAV tags as LIST/INFO, which Supysonic's tag reader ignores.)
"""
import sys

from mutagen.id3 import TALB, TIT2, TPE1, TPE2, TRCK
from mutagen.wave import WAVE

path, artist, album, title, track = sys.argv[1:6]
f = WAVE(path)
if f.tags is None:
    f.add_tags()
f.tags.add(TPE1(encoding=3, text=artist))
f.tags.add(TPE2(encoding=3, text=artist))
f.tags.add(TALB(encoding=3, text=album))
f.tags.add(TIT2(encoding=3, text=title))
f.tags.add(TRCK(encoding=3, text=track))
f.save()
