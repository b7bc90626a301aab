import Foundation
import NIOConcurrencyHelpers
import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// Links and access rules: with symlinks followed, a link names an image (or lists a folder) only when
/// the rule that decides its target decides it too, so that no link gives a restricted image a name
/// no rule restricts, or another rule's.
extension ImageCatalog {
    /// The access rules links are checked against (``TileRoutes/access``'s, set with it).
    nonisolated var linkRules: [AccessPolicy.Rule] { linkRuleStore.withLockedValue { $0 } }

    /// Sets the access rules links are checked against (from ``TileRoutes/access``).
    nonisolated func follow(rules: [AccessPolicy.Rule]) { linkRuleStore.withLockedValue { $0 = rules } }

    /// The file behind `id` in the folder, as the catalogue follows links
    /// (``SourceFile/find(_:in:known:followsSymlinks:rules:skipped:)``). Blocking.
    nonisolated func findSource(_ id: String, known: SourceFingerprint?, skipped: (String) -> Void = { _ in }) throws(TileError) -> SourceFile? {
        try SourceFile.find(id, in: root, known: known, followsSymlinks: followsSymlinks, rules: linkRules, skipped: skipped)
    }
}

extension SourceFile {
    /// Whether the image `id` (`name` and perhaps a page's suffix), found at `path`, is decided by the
    /// rule that decides the image its real path names (the folder's links resolved): a link, a
    /// master's or a folder's on the way, never gives an image another rule's name, or a name no rule
    /// restricts. Blocking.
    static func keepsRule(_ id: String, name: String, at path: String, root: String, rules: [AccessPolicy.Rule]) -> Bool {
        guard let place = realPlace(of: path, in: root) else { return false }
        let target = (place as NSString).deletingPathExtension
        return target == name || AccessPolicy.rule(for: id, in: rules) == AccessPolicy.rule(for: target + id.dropFirst(name.count), in: rules)
    }

    /// Whether the folder `id` (`maps/old`), found at `path`, is decided as the folder its real path
    /// names is (what a rule says of the images in each, as listings ask it): a link to a folder lists
    /// no other rule's folder. Blocking.
    static func keepsRule(folder id: String, at path: String, root: String, rules: [AccessPolicy.Rule]) -> Bool {
        guard let place = realPlace(of: path, in: root) else { return false }
        return place == id || AccessPolicy.rule(for: id + "/x", in: rules) == AccessPolicy.rule(for: place + "/x", in: rules)
    }

    /// Where `path` is in `root`, every link resolved (`maps/rome.jpg`); nil outside it. Blocking.
    static func realPlace(of path: String, in root: String) -> String? {
        BlockingCallCheck.check("realpath \(path)")
        guard let real = realpath(path, nil) else { return nil }
        defer { free(real) }
        guard let base = realpath(root, nil) else { return nil }
        defer { free(base) }
        let (target, folder) = (String(cString: real), String(cString: base))
        return target.hasPrefix(folder + "/") ? String(target.dropFirst(folder.count + 1)) : nil
    }
}
