import Arbiter
import Testing

@Suite("Interruption contract")
struct InterruptionTests {
    /// Music interrupted by an announcement gets began, shows interrupted, then ended(shouldResume: true) and plays.
    @Test func resumesMusicAfterAnnouncement() {
        var s = Script()
        #expect(s.request("music", .music) == [.granted("music", zones: ["kitchen"])])
        #expect(s.state("music") == .playing)
        s.advance(.seconds(10))
        #expect(
            s.request("chime", .announcement, key: "doorbell") == [
                .granted("chime", zones: ["kitchen"]),
                .interruptionBegan("music", zones: ["kitchen"]),
            ])
        #expect(s.state("music") == .interrupted)
        #expect(
            s.reason(of: .interruptionBegan("music", zones: ["kitchen"]))
                == .interruptedBy(
                    Contender(source: "chime", sourceClass: .announcement, priority: 50, kind: .transient)))
        s.advance(.seconds(2))
        #expect(s.release("chime") == [.finished("chime"), .interruptionEnded("music", shouldResume: true)])
        #expect(s.reason(of: .interruptionEnded("music", shouldResume: true)) == .interruptionOver(lasted: .seconds(2)))
        #expect(s.state("music") == .playing)
    }

    /// A user pause during the announcement makes the end say shouldResume false, and music stays paused.
    @Test func keepsMusicPausedWhenUserPausedDuringAnnouncement() {
        var s = Script()
        s.request("music", .music)
        s.request("chime", .announcement)
        #expect(s.user(.pause, "music") == [])
        #expect(s.state("music") == .paused)  // covered, and it will not resume
        #expect(s.release("chime") == [.finished("chime"), .interruptionEnded("music", shouldResume: false)])
        #expect(s.reason(of: .interruptionEnded("music", shouldResume: false)) == .userCommand(.pause))
        #expect(s.state("music") == .paused)
        s.user(.play, "music")
        #expect(s.state("music") == .playing)
    }

    /// A seek or change during the interruption counts as the user changing the source.
    @Test(arguments: [UserCommand.seek, .change])
    func refusesResumeAfterAnyPlaybackCommand(_ command: UserCommand) {
        var s = Script()
        s.request("music", .music)
        s.request("chime", .announcement)
        s.user(command, "music")
        s.release("chime")
        #expect(s.actions(for: "music").last == .interruptionEnded("music", shouldResume: false))
        #expect(s.reason(of: .interruptionEnded("music", shouldResume: false)) == .userCommand(command))
    }

    /// A play given during the interruption is not lost: the music resumes when it ends, and reads
    /// interrupted (not paused) meanwhile — also when it was paused before, after a pause, a seek,
    /// or an interruption longer than resume-within.
    @Test(arguments: [[UserCommand.play], [.pause, .play], [.seek, .play], [.play, .seek]])
    func resumesAfterAPlayGivenDuringTheInterruption(_ commands: [UserCommand]) {
        var s = Script()
        s.request("music", .music)
        s.request("chime", .announcement)
        for command in commands { s.user(command, "music") }
        #expect(s.state("music") == .interrupted)
        #expect(s.release("chime") == [.finished("chime"), .interruptionEnded("music", shouldResume: true)])
        #expect(s.reason(of: .interruptionEnded("music", shouldResume: true)) == .userCommand(.play))
        #expect(s.state("music") == .playing)
    }

    /// Music paused before a call, given play 250 s into it: the call ends 100 s later (350 s in all,
    /// past resume-within) and the music plays — the window counts from the play.
    @Test func resumesMusicPausedBeforeALongCallWhenPlayWasGivenDuringIt() {
        var s = Script()
        s.request("music", .music)
        s.user(.pause, "music")
        s.request("intercom", .call)
        #expect(s.state("music") == .paused)
        s.advance(.seconds(250))
        s.user(.play, "music")
        #expect(s.state("music") == .interrupted)
        s.advance(.seconds(100))
        #expect(s.release("intercom") == [.finished("intercom"), .interruptionEnded("music", shouldResume: true)])
        #expect(s.reason(of: .interruptionEnded("music", shouldResume: true)) == .userCommand(.play))
        #expect(s.state("music") == .playing)
    }

    /// A play given at a call's start does not outlive resume-within: after a 301 s call the music
    /// stays paused, as it would without the play.
    @Test func aPlayDoesNotOutliveResumeWithin() {
        var s = Script()
        s.request("music", .music)
        s.request("intercom", .call)
        s.user(.play, "music")
        s.advance(.seconds(301))
        #expect(s.release("intercom") == [.finished("intercom"), .interruptionEnded("music", shouldResume: false)])
        #expect(
            s.reason(of: .interruptionEnded("music", shouldResume: false))
                == .resumeWindowExceeded(lasted: .seconds(301), limit: .seconds(300)))
    }

    /// A permanent takeover after a play wins (the source reads paused from then on); a play given
    /// after the takeover wins over it.
    @Test func aTakeoverAfterAPlayWinsAndAPlayAfterATakeoverWins() {
        var s = Script()
        s.request("music", .music)
        s.request("chime", .announcement)
        s.user(.play, "music")
        #expect(s.state("music") == .interrupted)
        s.request("alarm", .announcement, kind: .permanent)  // waits for the chime
        s.release("chime")  // at the play's instant: after it, all the same
        #expect(s.state("music") == .paused)
        s.release("alarm")
        #expect(s.actions(for: "music").last == .interruptionEnded("music", shouldResume: false))
        #expect(
            s.reason(of: .interruptionEnded("music", shouldResume: false))
                == .permanentTakeover(
                    Contender(source: "alarm", sourceClass: .announcement, priority: 50, kind: .permanent)))

        var t = Script()
        t.request("music", .music)
        t.request("alarm", .announcement, kind: .permanent)
        #expect(t.state("music") == .paused)
        t.advance(.seconds(1))
        t.user(.play, "music")
        #expect(t.state("music") == .interrupted)
        t.release("alarm")
        #expect(t.actions(for: "music").last == .interruptionEnded("music", shouldResume: true))
    }

    /// A play given while one takeover covers wins over it, not over a second takeover that begins
    /// after the first ended.
    @Test func aSecondTakeoverAfterAPlayWins() {
        var s = Script()
        s.request("music", .music)
        s.request("alarm", .announcement, kind: .permanent)
        s.request("intercom", .call)
        s.user(.play, "music")
        #expect(s.state("music") == .interrupted)
        s.release("alarm")  // the call still covers it
        s.request("siren", .announcement, kind: .permanent)  // waits for the call
        s.release("intercom")  // the siren takes over
        #expect(s.state("music") == .paused)
        s.release("siren")
        #expect(s.actions(for: "music").last == .interruptionEnded("music", shouldResume: false))
        #expect(
            s.reason(of: .interruptionEnded("music", shouldResume: false))
                == .permanentTakeover(
                    Contender(source: "siren", sourceClass: .announcement, priority: 50, kind: .permanent)))
    }

    /// A seek alone during the interruption: the source reads paused while covered (it will not
    /// resume), and a play after it reads interrupted.
    @Test func aSeekReadsPausedWhileCovered() {
        var s = Script()
        s.request("music", .music)
        s.request("chime", .announcement)
        s.user(.seek, "music")
        #expect(s.state("music") == .paused)
        s.user(.play, "music")
        #expect(s.state("music") == .interrupted)
    }

    /// The last word counts: a play and then a pause leave it paused.
    @Test func staysPausedWhenThePauseCameAfterAPlay() {
        var s = Script()
        s.request("music", .music)
        s.request("chime", .announcement)
        s.user(.play, "music")
        s.user(.pause, "music")
        #expect(s.state("music") == .paused)
        s.release("chime")
        #expect(s.actions(for: "music").last == .interruptionEnded("music", shouldResume: false))
        #expect(s.reason(of: .interruptionEnded("music", shouldResume: false)) == .userCommand(.pause))
    }

    /// A volume change during the interruption is not a playback change: music still resumes.
    @Test func resumesDespiteVolumeChangeDuringInterruption() {
        var s = Script()
        s.request("music", .music)
        s.request("chime", .announcement)
        #expect(s.user(.volume, "music") == [])
        s.release("chime")
        #expect(s.actions(for: "music").last == .interruptionEnded("music", shouldResume: true))
    }

    /// Music that was already paused is told began, then ended(shouldResume: false) because it was not playing.
    @Test func refusesResumeForSourceNotPlayingWhenInterrupted() {
        var s = Script()
        s.request("music", .music)
        s.user(.pause, "music")
        s.request("chime", .announcement)
        #expect(s.state("music") == .paused)  // covered, but it was paused: it will not resume
        s.release("chime")
        #expect(s.actions(for: "music").last == .interruptionEnded("music", shouldResume: false))
        #expect(s.reason(of: .interruptionEnded("music", shouldResume: false)) == .notPlayingWhenBegan)
        #expect(s.state("music") == .paused)
    }

    /// A call lasting longer than music's resume-within (5 min) ends with shouldResume false and says why.
    @Test func refusesResumeAfterResumeWithinExceeded() {
        var s = Script()
        s.request("music", .music)
        s.request("intercom", .call)
        s.advance(.seconds(301))
        #expect(s.release("intercom") == [.finished("intercom"), .interruptionEnded("music", shouldResume: false)])
        #expect(
            s.reason(of: .interruptionEnded("music", shouldResume: false))
                == .resumeWindowExceeded(lasted: .seconds(301), limit: .seconds(300)))
        #expect(s.state("music") == .paused)
    }

    /// A call of exactly resume-within still resumes music (the limit is inclusive).
    @Test func resumesAtExactlyResumeWithin() {
        var s = Script()
        s.request("music", .music)
        s.request("intercom", .call)
        s.advance(.seconds(300))
        s.release("intercom")
        #expect(s.actions(for: "music").last == .interruptionEnded("music", shouldResume: true))
    }

    /// Music, then a call, then a doorbell during the call: one began and one ended for music, after both;
    /// the doorbell is queued behind the call and played after it.
    @Test func coalescesNestedInterruptions() {
        var s = Script()
        s.request("music", .music)
        s.request("intercom", .call)
        s.advance(.seconds(5))
        #expect(s.request("chime", .announcement, key: "doorbell") == [.queued("chime")])
        #expect(
            s.reason(of: .queued("chime"))
                == .delayedBy(Contender(source: "intercom", sourceClass: .call, priority: 90, kind: .transient)))
        s.advance(.seconds(5))
        #expect(s.release("intercom") == [.finished("intercom"), .granted("chime", zones: ["kitchen"])])
        #expect(s.reason(of: .granted("chime", zones: ["kitchen"])) == .waited(.seconds(5)))
        #expect(s.state("music") == .interrupted)
        s.advance(.seconds(1))
        #expect(s.release("chime") == [.finished("chime"), .interruptionEnded("music", shouldResume: true)])
        let music = s.actions(for: "music")
        #expect(
            music == [
                .granted("music", zones: ["kitchen"]), .interruptionBegan("music", zones: ["kitchen"]),
                .interruptionEnded("music", shouldResume: true),
            ])
    }

    /// A call that vanishes and is made again in the same step (`replaced`) keeps the music it
    /// interrupted interrupted: `finished` and the new call's grant, no `interruptionEnded` between;
    /// the music resumes when the new call ends, timed from the first call's start. (Vanished, then
    /// asked again, the music was told to resume, and interrupted again.)
    @Test func aCallReplacedInOneStepKeepsTheMusicInterrupted() {
        var s = Script()
        s.request("music", .music)
        s.request("call-1", .call, ["kitchen", "patio"])
        s.advance(.seconds(5))
        let again = Request(source: "call-2", sourceClass: .call, zones: ["kitchen", "patio"])
        #expect(
            s.send(.replaced("call-1", by: again)) == [
                .finished("call-1"), .granted("call-2", zones: ["kitchen", "patio"]),
            ])
        #expect(s.reason(of: .finished("call-1")) == .vanished)
        #expect(s.state("music") == .interrupted)
        s.advance(.seconds(1))
        #expect(s.release("call-2") == [.finished("call-2"), .interruptionEnded("music", shouldResume: true)])
        #expect(s.reason(of: .interruptionEnded("music", shouldResume: true)) == .interruptionOver(lasted: .seconds(6)))
    }

    /// Another music request replaces the playing one, which is told it lost for good (no began, no resume).
    @Test func replacesMusicForGood() {
        var s = Script()
        s.request("radio", .music)
        #expect(s.request("playlist", .music) == [.lostForGood("radio"), .granted("playlist", zones: ["kitchen"])])
        #expect(
            s.reason(of: .lostForGood("radio"))
                == .replacedBy(Contender(source: "playlist", sourceClass: .music, priority: 10, kind: .permanent)))
        #expect(s.state("radio") == nil)
        #expect(s.state("playlist") == .playing)
    }

    /// A replace takes the old music out only when the newcomer is let in: with music set to
    /// reject during higher priority, a playlist started during a call is refused and the music the
    /// call interrupted is kept (it was told it lost for good first, and both were lost), and resumes
    /// when the call ends.
    @Test func aRefusedReplacementKeepsTheMusicItWouldReplace() {
        var policy = Policy.default
        policy.classes[.music]?.duringHigher = .reject
        var s = Script(policy: policy)
        s.request("radio", .music)
        s.request("intercom", .call)
        #expect(s.request("playlist", .music) == [.rejected("playlist")])
        #expect(
            s.reason(of: .rejected("playlist"))
                == .higherRejects(Contender(source: "intercom", sourceClass: .call, priority: 90, kind: .transient)))
        #expect(s.state("radio") == .interrupted)
        #expect(s.release("intercom") == [.finished("intercom"), .interruptionEnded("radio", shouldResume: true)])
        #expect(s.state("radio") == .playing)
    }

    /// A replacement that may wait no time (`ttl: 0`) and cannot play now expires and replaces
    /// nothing: the music the call interrupted plays on after it.
    @Test func aReplacementWithTTLZeroThatCannotPlayNowKeepsTheMusic() {
        var policy = Policy.default
        policy.classes[.music]?.ttl = .zero
        var s = Script(policy: policy)
        s.request("radio", .music)
        s.request("intercom", .call)
        #expect(s.request("playlist", .music) == [.queued("playlist"), .expired("playlist")])
        #expect(s.reason(of: .expired("playlist")) == .ttlElapsed(.zero))
        #expect(s.state("radio") == .interrupted)
        #expect(s.release("intercom") == [.finished("intercom"), .interruptionEnded("radio", shouldResume: true)])
        #expect(s.state("radio") == .playing)
    }

    /// The same with a full queue: a request that may wait no time is not refused "queue full" (it
    /// would not wait in it): it expires, and the queued music it would replace is kept.
    @Test func aReplacementWithTTLZeroIsExpiredNotRefusedByAFullQueue() {
        var policy = Policy.default
        policy.classes[.music]?.ttl = .zero
        policy.classes[.music]?.queueLimit = 1
        var s = Script(policy: policy)
        s.request("intercom", .call)
        // Music asked again with its own ttl (as a reload does) waits behind the call: the queue is full.
        #expect(
            s.send(.request(Request(source: "again", sourceClass: .music, zones: ["kitchen"], ttl: .seconds(5))))
                == [.queued("again")])
        #expect(s.request("playlist", .music) == [.queued("playlist"), .expired("playlist")])
        #expect(s.reason(of: .expired("playlist")) == .ttlElapsed(.zero))
        #expect(s.state("again") == .queued)
    }

    /// A full queue refuses the replacement before anything is replaced; one the replace itself makes
    /// room for is queued (the queued music it replaces does not count against the limit).
    @Test func aReplacementRefusedByAFullQueueKeepsTheMusic() {
        var policy = Policy.default
        policy.classes[.music]?.queueLimit = 1
        var s = Script(policy: policy)
        s.request("radio", .music, ["kitchen"])
        s.request("intercom", .call, ["kitchen", "hall"])
        #expect(s.request("hall-music", .music, ["hall"]) == [.queued("hall-music")])
        // Queue full (hall-music waits), and the playlist for the kitchen would not replace it.
        #expect(s.request("playlist", .music, ["kitchen"]) == [.rejected("playlist")])
        #expect(s.reason(of: .rejected("playlist")) == .queueFull(limit: 1))
        #expect(s.state("radio") == .interrupted)
        // A request for the hall replaces the queued one: room for it.
        #expect(s.request("hall-2", .music, ["hall"]) == [.lostForGood("hall-music"), .queued("hall-2")])
    }

    /// An interrupted source replaced during the interruption gets no ended: it went away.
    @Test func sendsNoEndedToSourceThatWentAway() {
        var s = Script()
        s.request("radio", .music)
        s.request("chime", .announcement)
        s.request("playlist", .music)
        s.release("chime")
        #expect(
            s.actions(for: "radio") == [
                .granted("radio", zones: ["kitchen"]),
                .interruptionBegan("radio", zones: ["kitchen"]), .lostForGood("radio"),
            ])
        #expect(s.actions(for: "playlist") == [.queued("playlist"), .granted("playlist", zones: ["kitchen"])])
    }

    /// A permanent higher-priority request interrupting music ends with shouldResume false (permanent takeover).
    @Test func refusesResumeAfterPermanentTakeover() {
        var s = Script()
        s.request("music", .music)
        s.request("alarm", .announcement, kind: .permanent)
        s.release("alarm")
        #expect(s.actions(for: "music").last == .interruptionEnded("music", shouldResume: false))
        #expect(
            s.reason(of: .interruptionEnded("music", shouldResume: false))
                == .permanentTakeover(
                    Contender(
                        source: "alarm", sourceClass: .announcement, priority: 50,
                        kind: .permanent)))
    }

    /// A call arriving during a call is rejected, with the holder named.
    @Test func rejectsSecondCall() {
        var s = Script()
        s.request("door", .call)
        #expect(s.request("gate", .call) == [.rejected("gate")])
        #expect(
            s.reason(of: .rejected("gate"))
                == .sameRejects(Contender(source: "door", sourceClass: .call, priority: 90, kind: .transient)))
    }

    /// A vanished source finishes and releases what it silenced.
    @Test func finishesVanishedSource() {
        var s = Script()
        s.request("music", .music)
        s.request("chime", .announcement)
        #expect(s.send(.vanished("chime")) == [.finished("chime"), .interruptionEnded("music", shouldResume: true)])
        #expect(s.reason(of: .finished("chime")) == .vanished)
    }

    /// Stopping a source by the user finishes it: nothing more is sent to it.
    @Test func finishesSourceStoppedByUser() {
        var s = Script()
        s.request("music", .music)
        s.request("chime", .announcement)
        #expect(s.user(.stop, "music") == [.finished("music")])
        #expect(s.release("chime") == [.finished("chime")])
        #expect(s.reason(of: .finished("music")) == .userStopped)
    }
}

extension InterruptionTests {
    /// `wouldResume` says what the interruption's end would decide now, changing nothing: music
    /// 200 s into a call would resume, for 100 s more; at 301 s it would not (the end then says
    /// `shouldResume: false`); a play given at 250 s counts the window from there. Nil for music
    /// not interrupted. (A reload asks it before it asks interrupted music again.)
    @Test func wouldResumeSaysWhatTheEndWouldDecide() {
        var s = Script()
        s.request("music", .music)
        #expect(s.arbiter.wouldResume("music", at: s.now) == nil)
        s.request("intercom", .call)
        s.advance(.seconds(200))
        let early = s.arbiter.wouldResume("music", at: s.now)
        #expect(early?.resume == true && early?.within == .seconds(100), "\(String(describing: early))")
        s.advance(.seconds(101))
        let late = s.arbiter.wouldResume("music", at: s.now)
        #expect(late?.resume == false, "\(String(describing: late))")
        #expect(s.state("music") == .interrupted, "asking changed nothing")
        #expect(s.release("intercom") == [.finished("intercom"), .interruptionEnded("music", shouldResume: false)])
        var p = Script()
        p.request("music", .music)
        p.request("intercom", .call)
        p.advance(.seconds(250))
        p.user(.play, "music")
        p.advance(.seconds(60))
        let afterPlay = p.arbiter.wouldResume("music", at: p.now)
        #expect(afterPlay?.resume == true && afterPlay?.within == .seconds(240), "\(String(describing: afterPlay))")
        var unlimited = Policy.default
        unlimited.classes[.music]?.resumeWithin = nil
        var u = Script(policy: unlimited)
        u.request("music", .music)
        u.request("intercom", .call)
        u.advance(.seconds(3_600))
        let any = u.arbiter.wouldResume("music", at: u.now)
        #expect(any?.resume == true && any?.within == nil, "\(String(describing: any))")
    }
}
