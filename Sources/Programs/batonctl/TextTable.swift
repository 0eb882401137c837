/// A plain text table: a header row and left-aligned columns two spaces apart; the last column is
/// not padded.
struct TextTable {
    var header: [String]
    var rows: [[String]] = []

    init(_ header: String...) { self.header = header }

    mutating func add(_ row: String...) { rows.append(row) }

    var text: String {
        let all = [header] + rows
        let widths = header.indices.map { i in all.map { i < $0.count ? $0[i].count : 0 }.max() ?? 0 }
        return all.map { row in
            row.enumerated().map { i, cell in i == row.count - 1 ? cell : cell.padding(widths[i]) }
                .joined(separator: "  ").trimmingTrailingSpaces
        }.joined(separator: "\n")
    }
}

extension String {
    var trimmingTrailingSpaces: String {
        var text = self
        while text.last == " " { text.removeLast() }
        return text
    }
}
