import CALSA
import Glibc

/// Process-wide alsa-lib configuration.
public enum ALSAConfiguration {
    /// Makes alsa-lib read `path` instead of its default configuration (the file should include
    /// `</usr/share/alsa/alsa.conf>` first to keep the stock PCMs). Drops the cached global
    /// configuration so the next `PCM` open reads the file.
    /// Thread: control thread, while no PCM is being opened.
    public static func use(file path: String) {
        setenv("ALSA_CONFIG_PATH", path, 1)
        snd_config_update_free_global()
    }

    /// Reads the configuration now (`snd_config_update`: its files, and the hooks they name, which
    /// may load libraries) instead of at the first `PCM` open; false when it cannot be read, which
    /// each PCM's open will then say. Any thread: alsa-lib's update lock orders it with the opens.
    @discardableResult
    public static func load() -> Bool { snd_config_update() >= 0 }
}
