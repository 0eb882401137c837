// Systemd module: placeholder until its first real file lands.
