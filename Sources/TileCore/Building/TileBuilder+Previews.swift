/// The whole-image previews of a progressive JPEG made while it is read (``PreviewPolicy``).
extension TileBuilder {
    /// Starts a preview of the latest scan that has fully arrived, while the image is still being read
    /// (libjpeg is absorbing scans, no row has come out) and no other preview is being made. Best
    /// effort: a preview that fails is not published, and never fails the build (the build meets the
    /// same bytes and reports what is wrong with them).
    func makePreview() {
        guard let pending = preview else { return }
        switch state {
        case .decoding(nil):
            return
        case .decoding(let p?)
        where decode.phase == .starting && header?.isProgressive == true
            && p.image.levelCount > Self.previewLevel:
            if let job = previewJob, !job.isFinished { return }  // the next one takes the latest scan then
            let scan = min(pending.scans.scanEnds.count, pending.limit)
            guard scan > pending.made else { return }
            do throws(TileError) {
                previewJob = try PreviewJob(
                    scan: scan, prefix: Array(pending.bytes[..<pending.scans.scanEnds[scan - 1]]), image: p.image,
                    files: p.store.files, scratchDirectory: p.store.scratchDirectory, options: options)
                preview?.made = scan
                if scan >= pending.limit { preview = nil }
            } catch {
                preview = nil
            }
        default:
            preview = nil  // not progressive, or too small for a level at 1/8
        }
    }

    /// Blocks until the preview being made, if any, is written and published (or has failed).
    /// Previews are made on a thread of their own; this is for callers that want the latest now.
    public func waitForPreview() {
        previewJob?.wait()
        makePreview()
        previewJob?.wait()
    }

    /// Stops the preview being made, if any, and waits until nothing of it writes: from the moment the
    /// image's rows come out, only the build writes the coarse levels.
    func stopPreviews() {
        preview = nil
        previewJob?.stop()
        previewJob = nil
    }
}
