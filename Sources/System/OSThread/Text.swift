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
