import BatonTesting
import Glibc
import Media
import OSThread
import Synchronization
import Testing

@testable import Players

/// What batond starts — espeak-ng, a player's pause and resume commands — starts as from a shell.
/// batond's threads block SIGTERM, SIGINT and SIGHUP (the main thread takes them with `sigwait`)
/// and it ignores SIGPIPE; a child inherits both through `exec` unless it is spawned with
/// `ChildProcess.withDefaultSignals`. Each test runs the spawner on a thread set up like batond's.
@Suite(.ownThread) struct ChildProcessTests {
    /// Runs `body` on a thread that blocks and ignores what batond's threads do; its result.
    func onABatondLikeThread<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        signal(SIGPIPE, SIG_IGN)
        let result = Mutex<T?>(nil)
        let thread = startThread {
            var blocked = sigset_t()
            sigemptyset(&blocked)
            for s in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&blocked, s) }
            pthread_sigmask(SIG_BLOCK, &blocked, nil)
            let r = body()
            result.withLock { $0 = r }
        }
        pthread_join(thread, nil)
        return result.withLock { $0! }
    }

    func shell(_ command: String) -> Int32 { onABatondLikeThread { CommandControl.shell(command) ?? -1 } }

    /// A player command's shell ignores none of the signals 1–31 (dash clears the mask it starts
    /// with itself, but cannot undo an ignored SIGPIPE; 32 and 33 are glibc's own).
    @Test func aPlayerCommandIgnoresNoSignal() {
        let command = #"m=$(sed -n 's/^SigIgn:[[:space:]]*//p' /proc/$$/status); exit $(( (0x$m & 0x7fffffff) != 0 ))"#
        #expect(shell(command) == 0)
    }

    /// A player command has nothing of batond's but 0–2 (`ChildProcess.closeInherited`): a
    /// descriptor without close-on-exec (libcurl's and libmosquitto's sockets are so) went to it,
    /// and to anything it left running, holding batond's connections open after batond closed them.
    @Test func aPlayerCommandInheritsNoDescriptor() {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)  // without close-on-exec, as those libraries' sockets
        // A free number from 200 up (F_DUPFD leaves close-on-exec off; dup2 would take 200 from a
        // test running beside this one).
        let high = fcntl(fds[1], F_DUPFD, 200)
        #expect(high >= 200)
        defer {
            for fd in fds + [high] { close(fd) }
        }
        #expect(shell("[ -e /proc/$$/fd/\(high) ] && exit 1; exit 0") == 0, "fd \(high) reached the command")
    }

    /// A pipeline in a command ends when its reader does: the writer is killed by SIGPIPE (141),
    /// where with SIGPIPE ignored `yes` would get EPIPE, print "Broken pipe" and exit 1.
    @Test func aPipelineInACommandEndsOnSIGPIPE() {
        let command = #"s=$(exec 3>&1; { yes 2>/dev/null; echo $? >&3; } | head -n 1 >/dev/null); exit "$s""#
        #expect(shell(command) == 128 + SIGPIPE)
    }

    /// espeak-ng is started without a shell, so nothing would clear a blocked SIGTERM: a hung
    /// synthesizer could not be stopped the way systemd stops a service's processes. Here the
    /// speech command (a bash script, which keeps the mask it is given) signals itself: it must end
    /// at once with 143, not sleep on and exit 0 without audio.
    @Test func speechEndsOnSIGTERM() throws {
        let script = try TextFile.script(
            TestDirectory.make("speech-signal") + "/speak", "#!/bin/bash\nkill -TERM $$\nsleep 3\n")
        let error: String = onABatondLikeThread {
            do {
                _ = try SpeechSynthesizer(command: script).render("hello")
                return "no error"
            } catch {
                return "\(error)"
            }
        }
        #expect(error.contains("exit status 143"), "\(error)")
    }

    /// A synthesizer that hangs is stopped at its deadline, said, and leaves no process behind —
    /// what it started neither (a wrapper script's program): the wait had no end — the request,
    /// the MQTT announcements behind it and a thread per button press held for ever.
    @Test func aHungSynthesizerIsStoppedAtItsDeadline() throws {
        // Not exec: what it started must end too.
        let script = try TextFile.script(
            TestDirectory.make("speech-hang") + "/speak", "#!/bin/bash\nsleep 3599.25\necho never\n")
        let error: String = onABatondLikeThread {
            do {
                _ = try SpeechSynthesizer(command: script, timeout: .milliseconds(300)).render("hello")
                return "no error"
            } catch {
                return "\(error)"
            }
        }
        #expect(error.contains("did not finish within 0.3 s; it was stopped"), "\(error)")
        // SIGKILL to what it started is delivered at once; its end a moment later.
        #expect(waitUntil(seconds: 2, every: 0.01) { !Self.running("3599.25") }, "the synthesizer is gone")
    }

    /// batond's stop ends a rendering under way at once, whatever its deadline: a slow or hung
    /// speech program held the API request it answered, and the HTTP server's stop waits for its
    /// requests — past systemd's 5 s, which then killed batond before it saved its state.
    @Test func batondsStopEndsARenderingAtOnce() throws {
        let script = try TextFile.script(
            TestDirectory.make("speech-stop") + "/speak", "#!/bin/bash\nsleep 3599.5\necho never\n")
        let stop = StopFlag()
        let stopping = startThread {
            usleep(300_000)
            stop.set()
        }
        defer { pthread_join(stopping, nil) }
        let started = monotonicNanoseconds()
        let error: String = onABatondLikeThread {
            do {
                _ = try SpeechSynthesizer(command: script, stop: stop).render("hello")
                return "no error"
            } catch {
                return "\(error)"
            }
        }
        let took = Double(monotonicNanoseconds() - started) / 1e9
        #expect(error.contains("stopped: batond is stopping"), "\(error)")
        #expect(took < 1.5, "it took \(took) s, its deadline 30 s")
        #expect(waitUntil(seconds: 2, every: 0.01) { !Self.running("3599.5") }, "the synthesizer is gone")
    }

    /// Whether a process whose command line has `argument` runs.
    static func running(_ argument: String) -> Bool {
        guard let proc = opendir("/proc") else { return false }
        defer { closedir(proc) }
        while let entry = readdir(proc) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
            }
            guard Int(name) != nil, let file = fopen("/proc/\(name)/cmdline", "re") else { continue }
            var bytes = [UInt8](repeating: 0, count: 4096)
            let n = fread(&bytes, 1, bytes.count, file)
            fclose(file)
            if String(decoding: bytes[0..<n].map { $0 == 0 ? 32 : $0 }, as: UTF8.self).contains(argument) {
                return true
            }
        }
        return false
    }
}
