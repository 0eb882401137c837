import ALSA
import AudioCore
import BenchFloor
import CAllocCounter
import Engine
import Glibc
import Media

// baton-bench: what Baton's real-time pipeline costs, next to the bare libraries.
//
// Workload: 4 sources of 48 kHz stereo, each resampled to 44.1 kHz (music default: libsoxr HQ) in
// 10 ms blocks and written into its slot ring; 2 zones (44.1 kHz stereo S16, 10 ms periods) each
// mix 2 sources with gain ramps in flight, convert to S16 and write to the ALSA `null` PCM.
// Single thread, so thread CPU time is exact; `null` never blocks, so it runs as fast as it can.
//
//   swift run -c release baton-bench [--seconds N] [--resampler soxr-hq|src-medium|…]
//
// With `--pipeline URL|PATH` it plays one Ogg Opus stream through Baton's music pipeline instead
// (see Pipeline.swift); with `--floor URL|PATH` through the minimal C pipeline (BenchFloor).
// Both: [--resampler KIND] [--device PCM (null)] [--volume 0.8]; pipeline only: [--stages] (CPU per
// stage).

var seconds = 120
var kind = ResamplerKind.musicDefault
var pipelineTarget: String?
var floorTarget: String?
var device = "null"
var volume: Float = 0.8
var timeStages = false
var meterOnly = false
var args = CommandLine.arguments.dropFirst()
while let a = args.popFirst() {
    switch a {
    case "--seconds": seconds = Int(args.popFirst() ?? "") ?? seconds
    case "--resampler":
        let name = args.popFirst() ?? ""
        guard let k = ResamplerKind(rawValue: name) else {
            print("baton-bench: unknown resampler \(name)")
            exit(2)
        }
        kind = k
    case "--pipeline": pipelineTarget = args.popFirst()
    case "--floor": floorTarget = args.popFirst()
    case "--device": device = args.popFirst() ?? device
    case "--volume": volume = Float(args.popFirst() ?? "") ?? volume
    case "--stages": timeStages = true
    case "--meter": meterOnly = true
    default:
        print(
            "usage: baton-bench [--seconds N] [--resampler KIND]\n"
                + "       baton-bench --pipeline URL|PATH [--resampler KIND] [--device PCM] [--volume G] [--stages]\n"
                + "       baton-bench --floor URL|PATH [--resampler soxr-hq|soxr-vhq|src-medium|src-fastest] [--device PCM] [--volume G]\n"
                + "       baton-bench --meter"
        )
        exit(2)
    }
}
if let pipelineTarget {
    exit(runPipeline(target: pipelineTarget, kind: kind, device: device, volume: volume, timeStages: timeStages))
}
if let floorTarget { exit(baton_floor_pipeline(floorTarget, kind.rawValue, device, Double(volume), 1)) }
if meterOnly { exit(runMeterBench()) }

func threadSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

PCM.silenceLibraryErrors()
let sourceCount = 4
let zoneCount = 2
let inFrames = 480
let period = 441
let zones = (0..<zoneCount).map { _ in
    ZoneMixer(channels: 2, periodFrames: period, slotCount: 4, ringSamples: 44_100, rampFrames: 441)
}
let pcms: [PCM]
do {
    pcms = try (0..<zoneCount).map { _ in
        try PCM(
            PCMRequest(
                name: "null", rate: 44_100, channels: 2, format: .s16LE, periodFrames: period, bufferFrames: 4 * period)
        )
    }
} catch {
    print("baton-bench: \(error)")
    exit(1)
}
let slots = (0..<sourceCount).map { k in zones[k % zoneCount].claimSlot(gain: 0.5)! }
var converters: [any Resampler] = []
do {
    for _ in 0..<sourceCount {
        converters.append(try makeResampler(kind, inputRate: 48_000, outputRate: 44_100, channels: 2))
    }
} catch {
    print("baton-bench: \(error)")
    exit(1)
}
let input = UnsafeMutableBufferPointer<Float>.allocate(capacity: inFrames * 2)
let resampled = UnsafeMutableBufferPointer<Float>.allocate(capacity: (inFrames + 64) * 2)
let bytes = UnsafeMutableRawPointer.allocate(byteCount: period * 2 * 2, alignment: 16)

var resampleTime = 0.0
var renderTime = 0.0
var renderAllocations: UInt64 = 0
var cycleAllocations: UInt64 = 0
let warmup = 200
let cycles = seconds * 100
var frame = 0

@MainActor func cycle(_ n: Int) {
    let counting = n >= warmup
    if counting { baton_alloc_count_start() }
    let t0 = threadSeconds()
    for k in 0..<sourceCount {
        let f0 = Float(220 * (k + 1)) * 2 * .pi / 48_000
        for i in 0..<inFrames {
            let v = 0.3 * sin(f0 * Float(frame + i))
            input[2 * i] = v
            input[2 * i + 1] = v
        }
        if let (_, produced) = try? converters[k].process(input: UnsafeBufferPointer(input), output: resampled) {
            slots[k].write(resampled.baseAddress!, count: produced * 2)
        }
    }
    frame += inFrames
    let t1 = threadSeconds()
    let before = counting ? baton_alloc_count_stop() : 0
    if counting { baton_alloc_count_start() }
    if n % 50 == 0 { slots[n / 50 % sourceCount].setGain(n % 100 == 0 ? 0.1 : 0.5) }
    for z in 0..<zoneCount {
        zones[z].render()
        convertToS16(zones[z].mix, bytes.assumingMemoryBound(to: Int16.self), count: period * 2)
        _ = pcms[z].write(bytes, frames: period)
    }
    let t2 = threadSeconds()
    if counting {
        let render = baton_alloc_count_stop()
        renderAllocations += render
        cycleAllocations += render + before
    }
    resampleTime += t1 - t0
    renderTime += t2 - t1
}

for n in 0..<warmup { cycle(n) }
resampleTime = 0
renderTime = 0
for n in warmup..<(warmup + cycles) { cycle(n) }

let audioSeconds = Double(cycles) / 100
let total = resampleTime + renderTime
let floorSoxr = baton_floor_soxr_hq(Int32(sourceCount), Int32(seconds))
let floorSRC = baton_floor_samplerate(Int32(sourceCount), Int32(seconds), 1)
// The floor for the converter measured: the bare library at the same quality, where the C loop has one.
let matchingFloor: Double? =
    switch kind {
    case .soxr(.high): floorSoxr
    case .samplerate(.medium): floorSRC
    case .samplerate(.fastest): baton_floor_samplerate(Int32(sourceCount), Int32(seconds), 2)
    case .samplerate(.best): baton_floor_samplerate(Int32(sourceCount), Int32(seconds), 0)
    default: nil
    }
var usage = rusage()
getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)

func f(_ x: Double, _ digits: Int = 5) -> String {
    let p = pow(10.0, Double(digits))
    return String((x * p).rounded() / p)
}
print(
    """
    baton-bench: \(sourceCount) sources 48000→44100 Hz stereo (\(kind.rawValue)), \(zoneCount) zones × 2 sources, \
    10 ms periods, S16 to ALSA null, \(seconds) s of audio per zone (after \(warmup) warm-up cycles)
      pipeline CPU:            \(f(total / audioSeconds)) s per audio second  (\(f(audioSeconds / total, 1))× real time)
        resampling:            \(f(resampleTime / audioSeconds)) s/s  (\(f(100 * resampleTime / total, 1)) % of the pipeline)
        mix + convert + write: \(f(renderTime / audioSeconds)) s/s  (\(f(renderTime / Double(cycles * zoneCount) * 1e6, 2)) µs per zone period)
      allocations per render cycle (2 zones: mix, convert, snd_pcm_writei): \(f(Double(renderAllocations) / Double(cycles), 3))
      allocations per whole cycle (incl. resampling 4 sources):           \(f(Double(cycleAllocations) / Double(cycles), 3))
      floor, bare libsoxr HQ (C loop, same blocks):        \(f(floorSoxr / audioSeconds)) s/s
      floor, bare libsamplerate MEDIUM (C loop, same):     \(f(floorSRC / audioSeconds)) s/s
      Baton's resampling vs the bare library at the same quality: \(matchingFloor.map { f(resampleTime / $0, 2) + "×" } ?? "no C floor for \(kind.rawValue)")
      peak RSS: \(usage.ru_maxrss / 1024) MiB
    """)
