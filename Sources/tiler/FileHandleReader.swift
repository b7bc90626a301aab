import Foundation
import TileCore

/// Reads a file a chunk at a time.
final class FileHandleReader {
    private let handle: FileHandle

    init?(path: String) {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        self.handle = handle
    }

    deinit { try? handle.close() }

    func next(_ size: Int = 1 << 20) throws -> Data? {
        let data = try handle.read(upToCount: size) ?? Data()
        return data.isEmpty ? nil : data
    }
}
