/// The one loop of a decode, shared by builds (``TileBuilder``, bytes pushed as they arrive), previews
/// (``PreviewJob``, a stream cut at a scan's end) and resizes (``ImageResizer``, bytes pulled): the
/// header, the start (a progressive JPEG's scans absorbed), the rows, then the input read to its end.
/// Each caller gives what it does at each step (what a header makes, where rows go); the order of the
/// decoder's calls, and where a decode waits for more bytes, are decided here alone.
struct DecodeDriver {
    /// Where a decode is.
    enum Phase: Equatable {
        /// Waiting for the source's header.
        case header
        /// The header is read; the decoder is not giving rows yet (a progressive JPEG's scans).
        case starting
        /// Rows are coming.
        case rows
        /// Every row has been given; the rest of the input is read (a PNG's end, a TIFF's last byte).
        case finishing
        /// The decode has ended.
        case done
    }

    private(set) var phase = Phase.header

    /// Goes as far as the input given to `decoder` so far allows.
    /// - Parameters:
    ///   - decoder: the decoder, the same at every call.
    ///   - header: called once, with the source's header, before the decoder starts (where the caller
    ///     sets a JPEG's scale, or makes what the rows go to).
    ///   - started: called once, when the decoder is ready to give rows.
    ///   - rows: reads rows from the decoder into the caller's sink: the decoder's step, or nil when
    ///     the caller wants no more rows for now (a row budget spent).
    /// - Returns: whether the decode has ended.
    /// - Throws: what the decoder or the caller's steps throw.
    mutating func advance(
        _ decoder: any RowDecoder,
        header: (SourceHeader) throws(TileError) -> Void,
        started: () throws(TileError) -> Void = {},
        rows: () throws(TileError) -> DecodeStep?
    ) throws(TileError) -> Bool {
        while true {
            switch phase {
            case .header:
                guard let source = try decoder.readSourceHeader() else { return false }
                try header(source)
                phase = .starting
            case .starting:
                guard try decoder.start() == .ready else { return false }
                try started()
                phase = .rows
            case .rows:
                guard let step = try rows() else { return false }
                switch step {
                case .ready: continue
                case .needData: return false
                case .done: phase = .finishing
                }
            case .finishing:
                guard try decoder.finish() == .done else { return false }
                phase = .done
            case .done:
                return true
            }
        }
    }
}
