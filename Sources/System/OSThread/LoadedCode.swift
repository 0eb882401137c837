import CGlibc
import Glibc

/// The code and read-only data of the executable and of the libraries loaded with it, and a way to
/// give back the pages of it the process touched once and no longer runs.
///
/// Starting touches far more code than running does — the loader relocating some fifty libraries,
/// the configuration's parser, OpenSSL's and alsa-lib's set-up — and `mlockall` keeps every page
/// touched resident for good: batond's resident set playing was two thirds code it had run once.
/// `release` unmaps those pages from the process (`MADV_DONTNEED`); a page still in use is mapped
/// again at its next use — from the page cache, a minor fault, while the kernel still holds it,
/// else read from the disk — and locked again when the process is locked (`MLOCK_ONFAULT`).
///
/// Safe by construction, from the loader's own list (`dl_iterate_phdr`), not from what is resident:
/// a range is the pages of a loaded segment that is not writable (`PF_W`), less its object's
/// `PT_GNU_RELRO` (relocated at load, then made read-only) and any page the loader zero-filled, of an
/// object without text relocations;
/// the object is the executable or a library made undeletable (`RTLD_NOLOAD | RTLD_NODELETE`), so the
/// range is never unmapped and its addresses never hold anything else. Its pages are the file's
/// bytes, and dropping them loses nothing — except a breakpoint a debugger wrote into them.
public struct LoadedCode: Sendable {
    /// Page-aligned address ranges.
    public let ranges: [Range<UInt>]

    /// The ranges of the executable and of every library loaded now (except the vDSO), each library
    /// made undeletable first. Any thread: a library loaded or closed by another thread between the
    /// two looks at the loader's list is left out.
    public static func pin() -> LoadedCode {
        // Each by its name and where it is loaded: a library closed and loaded again under the same
        // name between the two looks (elsewhere) is not the one pinned.
        var pinned: Set<Pinned> = []
        for object in objects() where object.name.hasPrefix("/") {
            let base = baton_pin_loaded(object.name)
            if base != 0 { pinned.insert(Pinned(name: object.name, base: UInt(base))) }
        }
        let page = UInt(max(4096, sysconf(Int32(_SC_PAGESIZE))))
        // The pages the loader mapped for the segment (it maps whole pages), less any page of a
        // writable segment or of RELRO (a linker never puts two segments on one page; in case).
        let pages = { (r: Range<UInt>) in (r.lowerBound & ~(page - 1))..<((r.upperBound + page - 1) & ~(page - 1)) }
        var ranges: [Range<UInt>] = []
        for object in objects()
        where (object.isProgram || pinned.contains(Pinned(name: object.name, base: object.base)))
            && !object.hasTextRelocations
        {
            let written = object.written.map(pages)
            for segment in object.readOnly {
                ranges += written.reduce([pages(segment)]) { left, w in left.flatMap { $0.subtracting(w) } }
                    .filter { !$0.isEmpty }
            }
        }
        return LoadedCode(ranges: ranges)
    }

    /// Drops the ranges' pages from the process's resident set. `relock`: the process is locked
    /// (`mlockall`); each range is unlocked to be dropped and locked again as the rest
    /// (`MLOCK_ONFAULT`: a page is locked when it is next used). nil when all went through, else
    /// what failed first (the rest is still tried). Any thread but an output thread: it takes the
    /// kernel's lock of the address space for a moment, which a page fault in another thread waits for.
    public func release(relock: Bool) -> String? {
        var failure: String?
        func failed(_ call: String) { failure = failure ?? "\(call): \(String(cString: strerror(errno)))" }
        for range in ranges {
            guard let start = UnsafeMutableRawPointer(bitPattern: range.lowerBound) else { continue }
            let length = Int(range.upperBound - range.lowerBound)
            if relock && munlock(start, length) != 0 {
                failed("munlock")
                continue
            }
            if madvise(start, length, MADV_DONTNEED) != 0 { failed("madvise") }
            if relock && baton_mlock_onfault(start, length) != 0 { failed("mlock2") }
        }
        return failure
    }

    private struct Pinned: Hashable {
        var name: String
        var base: UInt
    }

    /// One object of the loader's list.
    struct Object {
        /// Its place in the loader's list.
        var index: UInt32
        var name: String
        var base: UInt
        var hasTextRelocations: Bool
        /// Its `PT_LOAD` segments without `PF_W`, at their addresses (a zero-filled one up to
        /// where its file bytes end).
        var readOnly: [Range<UInt>] = []
        /// What holds bytes other than the file's: its writable segments, its `PT_GNU_RELRO`, and
        /// the first byte a read-only segment's zero fill wrote (the loader's, on that page).
        var written: [Range<UInt>] = []
        /// The first in the list: the executable.
        var isProgram: Bool { index == 0 }
    }

    /// The loader's list of the objects loaded now, the executable first.
    static func objects() -> [Object] {
        var found: [Object] = []
        withUnsafeMutablePointer(to: &found) { list in
            baton_each_loaded_segment(
                { segment, context in
                    guard let segment = segment?.pointee, let context else { return }
                    let found = context.assumingMemoryBound(to: [Object].self)
                    if found.pointee.last?.index != segment.object_index {
                        found.pointee.append(
                            Object(
                                index: segment.object_index, name: String(cString: segment.object),
                                base: UInt(segment.base),
                                hasTextRelocations: segment.text_relocations != 0))
                    }
                    guard segment.start < segment.end else { return }
                    let (start, end, fileEnd) = (UInt(segment.start), UInt(segment.end), UInt(segment.file_end))
                    let last = found.pointee.count - 1
                    switch Int(segment.kind) {
                    case Int(BATON_SEGMENT_READ_ONLY) where fileEnd < end:
                        // Zero-filled past the file's bytes by the loader: that page is not the file's.
                        if start < fileEnd { found.pointee[last].readOnly.append(start..<fileEnd) }
                        found.pointee[last].written.append(fileEnd..<fileEnd + 1)
                    case Int(BATON_SEGMENT_READ_ONLY): found.pointee[last].readOnly.append(start..<end)
                    case Int(BATON_SEGMENT_WRITABLE), Int(BATON_SEGMENT_RELRO):
                        found.pointee[last].written.append(start..<end)
                    default: break
                    }
                }, list)
        }
        return found
    }
}

extension Range where Bound == UInt {
    /// This range without `other`: zero, one or two ranges.
    func subtracting(_ other: Range<UInt>) -> [Range<UInt>] {
        guard overlaps(other) else { return [self] }
        var left: [Range<UInt>] = []
        if lowerBound < other.lowerBound { left.append(lowerBound..<other.lowerBound) }
        if other.upperBound < upperBound { left.append(other.upperBound..<upperBound) }
        return left
    }
}
