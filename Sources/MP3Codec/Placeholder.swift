// MP3Codec module: placeholder until its first real file lands.
