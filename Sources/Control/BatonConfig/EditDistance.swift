/// Suggestions for misspelt keys.
enum EditDistance {
    /// The longest word a suggestion is looked for.
    static let longestWord = 64
    /// The most candidates a suggestion is looked for among (keys are a few dozen; zones a few).
    static let mostCandidates = 1_000

    /// Levenshtein distance between two strings, by Unicode scalar.
    static func between(_ a: String, _ b: String) -> Int {
        let a = Array(a.unicodeScalars)
        let b = Array(b.unicodeScalars)
        if a.isEmpty { return b.count }
        var previous = Array(0...b.count)
        var current = previous
        for i in 1...a.count {
            current[0] = i
            for j in stride(from: 1, through: b.count, by: 1) {
                let substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)
                current[j] = min(previous[j] + 1, current[j - 1] + 1, substitution)
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }

    /// The candidate closest to `word`, if it is close enough to be a likely typo: at most 2 edits,
    /// or a third of the word's length for long words, and fewer edits than the word has characters
    /// (so "ab" does not suggest "api"). Ties go to the earlier candidate.
    /// A word longer than ``longestWord`` characters gets none, and a candidate longer than 4 ×
    /// that in bytes is none: no name is that long, and the distance takes time and memory in the
    /// words' lengths, for every candidate (a 3.5 MB value, aliased 10 000 times).
    static func suggestion(for word: String, among candidates: [String]) -> String? {
        guard word.utf8.count <= 4 * longestWord, word.count <= longestWord else { return nil }
        // Nor among more than `mostCandidates`: each unknown name was measured against every one
        // (20,000 unknown zone names among 20,000 zones: 4 × 10⁸ distances at a reload).
        guard candidates.count <= mostCandidates else { return nil }
        let limit = max(2, word.count / 3)
        let lowered = word.lowercased()
        var best: (candidate: String, distance: Int)?
        for candidate in candidates where candidate.utf8.count <= 4 * longestWord {
            let distance = between(lowered, candidate)
            if distance <= limit, distance < word.count, distance < (best?.distance ?? .max) {
                best = (candidate, distance)
            }
        }
        return best?.candidate
    }
}
