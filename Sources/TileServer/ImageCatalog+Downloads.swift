import Foundation
import TileActors
import TileCore

extension ImageCatalog {
    /// The master file behind `id` in the folder, opened for sending as it is (a download): a JPEG,
    /// PNG, TIFF or JPEG 2000 found as an image's source is (the same rules: symlinks only when the
    /// catalogue follows them, never a FIFO), with the fingerprint of the version opened. Nil for a
    /// page identifier (a book is downloaded at its first page's), a store folder, or no such file.
    func master(of id: String) async -> (file: ReadOnlyFile, master: Master, fingerprint: SourceFingerprint)? {
        guard Self.isPathIdentifier(id) else { return nil }
        let found = try? await threadPool.blocking { () throws(TileError) -> (ReadOnlyFile, Master, SourceFingerprint)? in
            guard let source = try self.findSource(id, known: nil), source.kind != .store else { return nil }
            let file = try ReadOnlyFile(path: source.path)
            // The file opened is the one fingerprinted: not replaced between the look and the open.
            let identity = source.fingerprint.identity
            guard file.device == identity.device, file.inode == identity.inode, file.byteCount == identity.byteCount else { return nil }
            return (file, Master(id: id, source: source), source.fingerprint)
        }
        return found ?? nil
    }
}
