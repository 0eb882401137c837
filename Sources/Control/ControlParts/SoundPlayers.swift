import Media
import Players

/// Sound players made from the sounds directory: each sound decoded, mapped and resampled once per
/// zone format for a request (zones of one format share the samples), and kept by the library
/// within its cache's budget, before the request reaches the control plane's lock.
extension SoundLibrary {
    /// Checks a requested sound name (a bad request when it could escape the directory).
    package func check(_ sound: String) throws(ControlError) {
        do { try SoundLibrary.validate(name: sound) } catch {
            throw ControlError(.badRequest, "sound \"\(sound)\": \(error.problem)")
        }
    }

    /// The named sound, in each of `zones`' formats.
    package func player(_ sound: String, loop: Bool, in zones: [ZoneHandle]) throws(ControlError) -> SoundPlayer {
        SoundPlayer(
            label: sound, loop: loop,
            samples: try perZone(zones) { zone throws(MediaError) in
                try samples(sound, rate: zone.rate, channels: zone.channels)
            } failure: { error in
                ControlError(
                    error.problem.hasPrefix("unknown sound") ? .unknownSound : .unprocessable,
                    "sound \"\(sound)\": \(error.problem)")
            })
    }

    /// Rendered speech, in each of `zones`' formats.
    package func player(_ speech: Speech.Rendered, in zones: [ZoneHandle]) throws(ControlError) -> SoundPlayer {
        SoundPlayer(
            label: speech.label, loop: false,
            samples: try perZone(zones) { zone throws(MediaError) in
                try convert(speech.pcm, name: "speech", rate: zone.rate, channels: zone.channels)
            } failure: {
                ControlError(.unprocessable, "speech: \($0.problem)")
            })
    }

    private func perZone(
        _ zones: [ZoneHandle], _ make: (ZoneHandle) throws(MediaError) -> [Float],
        failure: (MediaError) -> ControlError
    ) throws(ControlError) -> [String: [Float]] {
        // Once per format: zones of one format share one copy (a sound too long for the library's
        // cache, or speech, which it does not keep, was converted again for each).
        var samples: [String: [Float]] = [:]
        var byFormat: [[Int]: [Float]] = [:]
        for zone in zones {
            let format = [zone.rate, zone.channels]
            if let shared = byFormat[format] {
                samples[zone.name] = shared
                continue
            }
            do throws(MediaError) {
                let made = try make(zone)
                byFormat[format] = made
                samples[zone.name] = made
            } catch { throw failure(error) }
        }
        return samples
    }
}
