#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What is at a path itself (`lstat`: a symlink is a symlink, never what it points to). Blocking.
package enum FolderEntry {
    case none, file, folder, other

    package init(at path: String) {
        BlockingCallCheck.check("lstat \(path)")
        var info = stat()
        guard lstat(path, &info) == 0 else {
            self = .none
            return
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG: self = .file
        case S_IFDIR: self = .folder
        default: self = .other
        }
    }
}
