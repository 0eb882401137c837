import Testing
import YAML

@Suite struct YAMLParserTests {
    /// Scalars, sequences and mappings come back in source order with 1-based marks.
    @Test func buildsTreeWithMarks() throws {
        let text = """
            name: kitchen
            rates: [44100, 48000]
            nested:
              key: "quoted"
            """
        let root = try #require(try YAMLParser.parse(text: text, file: "t.yaml"))
        let pairs = try #require(root.mapping)
        #expect(pairs.map(\.key) == ["name", "rates", "nested"])
        #expect(pairs[0].keyMark == Mark(line: 1, column: 1))
        #expect(pairs[0].value == YAMLNode(.scalar(YAMLScalar("kitchen")), mark: Mark(line: 1, column: 7)))
        #expect(pairs[1].value.sequence?.map { $0.scalar?.value } == ["44100", "48000"])
        #expect(pairs[1].value.sequence?[1].mark == Mark(line: 2, column: 16))
        let key = try #require(root["nested"]?["key"])
        #expect(key.scalar == YAMLScalar("quoted", style: .doubleQuoted))
        #expect(key.mark == Mark(line: 4, column: 8))
    }

    /// Text with no document (blank or only comments) parses to nil.
    @Test(arguments: ["", "\n\n", "# only a comment\n"])
    func returnsNilForNoDocument(text: String) throws {
        #expect(try YAMLParser.parse(text: text, file: "t.yaml") == nil)
    }

    /// `key:` with nothing after it is a null scalar.
    @Test func readsEmptyValueAsNull() throws {
        let root = try #require(try YAMLParser.parse(text: "a:\nb: ~\nc: ''\n", file: "t.yaml"))
        #expect(root["a"]?.isNull == true)
        #expect(root["b"]?.isNull == true)
        #expect(root["c"]?.isNull == false)
    }

    /// A duplicate key is an error at the second key, naming its path and the first key's position.
    @Test func rejectsDuplicateKeys() {
        let text = "zones:\n  kitchen:\n    rate: 1\n    rate: 2\n"
        #expect {
            try YAMLParser.parse(text: text, file: "t.yaml")
        } throws: { error in
            (error as? YAMLError)?.description
                == "t.yaml:4:5: zones.kitchen.rate: duplicate key \"rate\" (first at line 3, column 5)"
        }
    }

    /// A syntax error carries libyaml's problem text and the line and column where it was found.
    @Test func reportsSyntaxErrorPosition() {
        let text = "zones:\n  kitchen: [1, 2\n  patio: 3\n"
        #expect {
            try YAMLParser.parse(text: text, file: "t.yaml")
        } throws: { error in
            guard let error = error as? YAMLError, case .syntax(let problem, _, _) = error.reason else { return false }
            return error.mark == Mark(line: 3, column: 8) && problem == "did not find expected ',' or ']'"
        }
    }

    /// Invalid UTF-8 is a syntax error at the offending byte, not silently replaced.
    @Test func rejectsInvalidUTF8() {
        let bytes = Array("a: ok\nb: x".utf8) + [0xFF] + Array("\n".utf8)
        #expect {
            try YAMLParser.parse(utf8: bytes, file: "t.yaml")
        } throws: { error in
            (error as? YAMLError)?.mark == Mark(line: 2, column: 5)
        }
    }

    /// An alias becomes a copy of the anchored node.
    @Test func resolvesAliases() throws {
        let root = try #require(try YAMLParser.parse(text: "a: &x {k: 1}\nb: *x\n", file: "t.yaml"))
        #expect(root["b"] == root["a"])
    }

    /// An alias to an undefined anchor is an error naming it.
    @Test func rejectsUndefinedAlias() {
        #expect(
            throws: YAMLError(
                file: "t.yaml", mark: Mark(line: 1, column: 4), path: "a",
                reason: .undefinedAlias("nope"))
        ) {
            try YAMLParser.parse(text: "a: *nope\n", file: "t.yaml")
        }
    }

    /// Nested aliases that would expand past the node limit are rejected instead of exhausting memory.
    @Test func rejectsAliasBombs() {
        var text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        for level in 1...8 {
            let ref = "*a\(level - 1)"
            text += "a\(level): &a\(level) [\(Array(repeating: ref, count: 10).joined(separator: ", "))]\n"
        }
        #expect {
            try YAMLParser.parse(text: text, file: "t.yaml")
        } throws: { error in
            (error as? YAMLError)?.reason == .tooManyNodes(limit: YAMLParser.nodeLimit)
        }
    }

    /// Aliases of a long string past the text limit are rejected at once, naming the alias that
    /// went over: an alias counted as one node whatever its length, and 10 000 aliases of a 3.5 MB
    /// string (35 GB of text, in batond's error messages) were accepted. Within it they are fine.
    @Test func rejectsAliasesPastTheTextLimit() throws {
        let value = "\"" + String(repeating: "A", count: 3_500_000) + "\""
        let text =
            "sounds: &a \(value)\ngroups: {g: [\(Array(repeating: "*a", count: 10_000).joined(separator: ", "))]}\n"
        let started = ContinuousClock.now
        // The outcome, not the tree: a failure would print 35 GB of it.
        let outcome: Result<Bool, YAMLError>
        do {
            outcome = .success(try YAMLParser.parse(text: text, file: "t.yaml") != nil)
        } catch {
            outcome = .failure(error)
        }
        #expect(
            outcome
                == .failure(
                    YAMLError(
                        file: "t.yaml", mark: Mark(line: 2, column: 26), path: "groups.g[3]",
                        reason: .tooMuchText(limit: YAMLParser.textLimit))))
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(
            YAMLError(file: "t.yaml", mark: .start, reason: .tooMuchText(limit: YAMLParser.textLimit)).message
                == "the document expands to more than 16 MiB of text (aliases of long values)")
        let within = try #require(try YAMLParser.parse(text: "a: &a \(value)\nb: [*a, *a, *a]\n", file: "t.yaml"))
        #expect(within.mapping?.count == 2)
    }

    /// A 100 KB line of `[` is rejected at the 65th level, at once (libyaml alone took 17 s on it):
    /// the error names where the nesting went too deep.
    @Test func rejectsDeepNesting() {
        let text = "zones:\n  k: " + String(repeating: "[", count: 100_000)
        let started = ContinuousClock.now
        #expect {
            try YAMLParser.parse(text: text, file: "t.yaml")
        } throws: { error in
            (error as? YAMLError)?.reason == .tooDeep(limit: YAMLParser.depthLimit)
                && (error as? YAMLError)?.mark.line == 2
        }
        #expect(ContinuousClock.now - started < .seconds(2))
        #expect(
            (try? YAMLParser.parse(
                text: "a: " + String(repeating: "[", count: 63) + String(repeating: "]", count: 63), file: "t.yaml"))
                != nil,
            "63 levels are fine")
    }

    /// A second document in the stream is an error.
    @Test func rejectsMultipleDocuments() {
        #expect(throws: YAMLError(file: "t.yaml", mark: Mark(line: 2, column: 1), reason: .multipleDocuments)) {
            try YAMLParser.parse(text: "a: 1\n---\nb: 2\n", file: "t.yaml")
        }
    }

    /// A mapping used as a key is rejected.
    @Test func rejectsNonScalarKeys() {
        #expect {
            try YAMLParser.parse(text: "? [a, b]\n: 1\n", file: "t.yaml")
        } throws: { error in
            (error as? YAMLError)?.reason == .nonScalarKey
        }
    }
}
