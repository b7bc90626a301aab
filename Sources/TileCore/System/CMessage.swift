extension String {
    /// The text a C call wrote into `buffer` (a message buffer the caller passed in), up to its first
    /// NUL; bytes that are not UTF-8 are replaced, never trusted.
    init(cMessage buffer: [CChar]) {
        self.init(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
