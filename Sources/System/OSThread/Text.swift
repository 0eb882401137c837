extension StringProtocol {
    /// The text without white space (spaces, tabs, line ends, other Unicode spaces) at either end;
    /// none inside is touched. For header values, commands and texts read from outside.
    public func trimmingWhitespace() -> String {
        guard let first = firstIndex(where: { !$0.isWhitespace }), let last = lastIndex(where: { !$0.isWhitespace })
        else {
            return ""
        }
        return String(self[first...last])
    }
}

extension StringProtocol {
    /// A 64-bit FNV-1a hash of the text's UTF-8, in hex: a short name, stable across runs and
    /// machines, that tells two texts apart (a file name for a longer one, a key that must not show it).
    public var fnv1aHex: String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return String(hash, radix: 16)
    }
}
