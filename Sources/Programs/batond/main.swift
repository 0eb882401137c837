import BatonConfig
import BatonDaemon
import BatonService
import Glibc
import OSThread

// batond: the Baton daemon. `batond --config FILE` (default config/baton.yaml).

func usage() -> Never {
    print(
        """
        usage: batond [--config FILE] [--check] [--verbose] [--alsa-snippet [--plugin PATH]]
          --check         validate the config and exit
          --alsa-snippet  print the pcm.baton_<name> definitions of the external sources and exit
                          (--plugin PATH adds the pcm_type.baton line for a plugin outside alsa-lib's dir)
        """)
    exit(2)
}

var configPath = "config/baton.yaml"
var checkOnly = false
var verbose = false
var alsaSnippet = false
var pluginPath: String?
var args = CommandLine.arguments.dropFirst()
while let arg = args.popFirst() {
    switch arg {
    case "--config", "-c":
        guard let p = args.popFirst() else { usage() }
        configPath = p
    case "--check": checkOnly = true
    case "--alsa-snippet": alsaSnippet = true
    case "--plugin":
        guard let p = args.popFirst() else { usage() }
        pluginPath = p
    case "--verbose", "-v": verbose = true
    case "--help", "-h": usage()
    default:
        print("batond: unknown argument \(arg)")
        usage()
    }
}

let logger = Logger(minimum: verbose ? .debug : .info)
// The loader's work is done: its pages of the libraries (symbol tables, relocations, constructors)
// are given back before the configuration is read — the first of the releases that keep batond's
// resident set to the code it runs (LoadedCode, Service.run).
if let failure = LoadedCode.pin().release(relock: false) {
    logger.warning("cannot give back the loader's pages of code (\(failure)): batond's memory stays larger")
}
let config: BatonConfiguration
do {
    // The files a start opens are checked too (not for `--alsa-snippet`, which opens none).
    config = try BatonConfiguration.load(path: configPath, checkingFiles: !alsaSnippet)
} catch {
    logger.error("invalid configuration, not starting:\n\(error)")
    exit(1)
}
if alsaSnippet {
    guard let external = config.externalSources, !external.sources.isEmpty else {
        logger.error("\(configPath) defines no external-sources: nothing to print")
        exit(1)
    }
    print(external.alsaSnippet(plugin: pluginPath), terminator: "")
    exit(0)
}
// Loaded, but taken otherwise than written (each at its line), or what batond asks for is refused
// at run time: said at start and by `--check`.
for warning in config.loadWarnings { logger.warning("\(warning)") }
for warning in config.classWarnings { logger.warning("\(configPath): \(warning)") }
if checkOnly {
    print("\(configPath): ok (\(config.zones.count) zones)")
    exit(0)
}
exit(Service.run(config: config, configPath: configPath, logger: logger))
