import ALSA
import BatonConfig
import Glibc
import HTTPServer

/// The daemon process: start the parts in order, wait for SIGTERM/SIGINT, stop in reverse.
public enum Service {
    /// Runs until SIGTERM or SIGINT; returns the process exit status. Main thread only, before any
    /// other thread exists (it blocks the signals so that every thread inherits the mask).
    public static func run(config: BatonConfiguration, configPath: String?, logger: Logger) -> Int32 {
        var signals = sigset_t()
        sigemptyset(&signals)
        for s in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&signals, s) }
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        signal(SIGPIPE, SIG_IGN)

        if let dir = config.outputDir {
            setenv("BATON_OUTPUT_DIR", dir, 1)
            if mkdir(dir, 0o755) != 0 && errno != EEXIST {
                logger.error("output-dir \(dir): cannot create: \(String(cString: strerror(errno)))")
                return 1
            }
            logger.info("file PCMs write into \(dir)")
        }
        if let alsa = config.alsaConfig {
            guard access(alsa, R_OK) == 0 else {
                logger.error("alsa-config \(alsa): cannot read: \(String(cString: strerror(errno)))")
                return 1
            }
            ALSAConfiguration.use(file: alsa)
        }
        PCM.silenceLibraryErrors()
        if mlockall(MCL_CURRENT | MCL_FUTURE) != 0 {
            logger.warning("cannot lock memory (mlockall: \(String(cString: strerror(errno)))): audio may glitch under memory pressure")
        }

        let daemon = Daemon(config: config, configPath: configPath, logger: logger)
        daemon.start()
        let api = API(daemon: daemon)
        let server: HTTPServer
        do {
            server = try HTTPServer(host: config.api.listen.host, port: Int(config.api.listen.port),
                                    maxBodyBytes: config.api.maxBody) { api.handle($0) }
        } catch {
            logger.error("control API: \(error)")
            daemon.stop()
            return 1
        }
        logger.info("control API on http://\(config.api.listen.host):\(server.port)/ (status page), /api/v1/...")

        while true {
            var received: Int32 = 0
            sigwait(&signals, &received)
            if received == SIGHUP {
                logger.info("SIGHUP: reloading \(configPath ?? "the configuration")")
                _ = daemon.reload()
                continue
            }
            logger.info("signal \(received): stopping")
            break
        }
        server.stop()
        daemon.stop()
        logger.info("stopped")
        return 0
    }
}
