import ArgumentParser
import Configuration
import Foundation
import TileServer

/// The config file's `access` key: restricted images (IIIF Authorization Flow 2.0), read into an
/// ``AccessPolicy``. Only the config file has it (a secret and a list of rules are no flags).
///
/// ```json
/// "access": {
///   "users": "users.htpasswd", "groups": "groups.txt", "sessionKey": "at least 32 characters of secret ...",
///   "origins": ["https://viewer.example"], "userHeader": "X-Remote-User", "groupsHeader": "X-Remote-Groups",
///   "sessionLifetime": 28800, "label": "...", "heading": "...", "note": "...",
///   "rules": [{"match": "restricted*", "allow": ["alice", "group:staff"], "degraded": {"maxWidth": 400}}]
/// }
/// ```
/// `users` is an htpasswd file of bcrypt hashes (`htpasswd -B`), `groups` Apache's group file
/// (`staff: alice bob`), both relative to the config file's folder; `userHeader` is taken only from
/// `trustedProxies`.
struct AccessSettings: Decodable {
    var users: String?
    var groups: String?
    var sessionKey: String
    var rules: [AccessPolicy.Rule]
    var origins: [String]?
    var userHeader: String?
    var groupsHeader: String?
    var sessionLifetime: Int?
    var label: String?
    var heading: String?
    var note: String?

    static let keys: Set = [
        "users", "groups", "sessionKey", "rules", "origins", "userHeader", "groupsHeader", "sessionLifetime", "label", "heading", "note"
    ]

    /// The policy of the config file at `path`'s `access` key, nil without one.
    /// - Throws: `ValidationError` naming what is wrong: an unknown key, a missing or short key, a file
    ///   that cannot be read, a rule without `match` or `allow`.
    static func policy(configPath path: String, trustedProxies: [AddressRange]) throws -> AccessPolicy? {
        guard let data = FileManager.default.contents(atPath: path),
            let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any], let access = object["access"]
        else { return nil }
        guard let fields = access as? [String: Any] else { throw ValidationError("access: must be an object") }
        if let unknown = fields.keys.sorted().first(where: { !keys.contains($0) }) {
            throw ValidationError("access: a key tiler serve does not know: \(unknown) (known: \(keys.sorted().joined(separator: ", ")))")
        }
        // A rule's or a tier's typo must not go unsaid: a tier it emptied would restrict nothing.
        for rule in fields["rules"] as? [Any] ?? [] {
            guard let rule = rule as? [String: Any] else { throw ValidationError("access.rules: each rule is an object") }
            if let unknown = rule.keys.sorted().first(where: { !["match", "allow", "degraded"].contains($0) }) {
                throw ValidationError("access.rules: a key tiler serve does not know: \(unknown) (known: allow, degraded, match)")
            }
            if let tier = rule["degraded"] as? [String: Any],
                let unknown = tier.keys.sorted().first(where: { !["maxWidth", "maxHeight", "maxArea"].contains($0) })
            {
                throw ValidationError("access.rules: degraded: a key tiler serve does not know: \(unknown) (known: maxArea, maxHeight, maxWidth)")
            }
        }
        let settings: AccessSettings
        do {
            settings = try JSONDecoder().decode(Self.self, from: JSONSerialization.data(withJSONObject: access))
        } catch {
            throw ValidationError("access: \(error)")
        }
        guard settings.sessionKey.utf8.count >= 32 else { throw ValidationError("access.sessionKey: must be at least 32 characters") }
        for rule in settings.rules where rule.allow.isEmpty || rule.match.isEmpty {
            throw ValidationError("access.rules: a rule needs a match and someone to allow (\"*\" for any user who logged in)")
        }
        for rule in settings.rules where rule.degraded.map({ !$0.isLimited }) == true {
            throw ValidationError("access.rules: \(rule.match): degraded needs maxWidth, maxHeight or maxArea, positive")
        }
        for origin in settings.origins ?? [] where AccessPolicy.origin(origin) == nil {
            throw ValidationError("access.origins: \(origin) is not an origin (https://viewer.example, a port at most)")
        }
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent()
        func text(_ file: String, _ key: String) throws -> String {
            let url = file.hasPrefix("/") ? URL(fileURLWithPath: file) : folder.appendingPathComponent(file)
            guard let data = FileManager.default.contents(atPath: url.path) else { throw ValidationError("access.\(key): cannot read \(url.path)") }
            return String(decoding: data, as: UTF8.self)
        }
        var policy = AccessPolicy(
            rules: settings.rules, users: try settings.users.map { AccessPolicy.users(htpasswd: try text($0, "users")) } ?? [:],
            groups: try settings.groups.map { AccessPolicy.groups(groupFile: try text($0, "groups")) } ?? [:],
            sessionKey: Array(settings.sessionKey.utf8))
        if settings.users != nil, policy.users.values.contains(where: { !$0.hasPrefix("$2") }) {
            throw ValidationError("access.users: every hash must be bcrypt (htpasswd -B)")
        }
        if let seconds = settings.sessionLifetime {
            guard seconds > 0 else { throw ValidationError("access.sessionLifetime: must be positive") }
            policy.sessionLifetime = .seconds(seconds)
        }
        policy.viewerOrigins = Set((settings.origins ?? []).compactMap(AccessPolicy.origin))
        policy.userHeader = try settings.userHeader.map { try headerName($0, "userHeader") }
        policy.groupsHeader = try settings.groupsHeader.map { try headerName($0, "groupsHeader") }
        if policy.userHeader != nil, trustedProxies.isEmpty {
            throw ValidationError("access.userHeader: needs trustedProxies (--trusted-proxy), the only peers it is taken from")
        }
        policy.trustedProxies = trustedProxies
        if let label = settings.label { policy.label = label }
        if let heading = settings.heading { policy.heading = heading }
        if let note = settings.note { policy.note = note }
        return policy
    }

    private static func headerName(_ text: String, _ key: String) throws -> String {
        let token = CharacterSet(charactersIn: "!#$%&'*+-.^_`|~").union(.alphanumerics)
        guard !text.isEmpty, text.unicodeScalars.allSatisfy({ $0.isASCII && token.contains($0) }) else {
            throw ValidationError("access.\(key): \(text) is not a header name")
        }
        return text
    }
}

/// The config file's snapshot for swift-configuration: JSON's, of everything but `access` (its rules are
/// an array of objects, which JSON snapshots do not take; ``AccessSettings`` reads that key itself).
struct ServeConfigSnapshot: FileConfigSnapshot {
    typealias ParsingOptions = JSONSnapshot.ParsingOptions
    private let json: JSONSnapshot

    init(data: RawSpan, providerName: String, parsingOptions: ParsingOptions) throws {
        var bytes = data.withUnsafeBytes { Array($0) }
        if var object = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any], object["access"] != nil {
            object["access"] = nil
            bytes = Array(try JSONSerialization.data(withJSONObject: object))
        }
        json = try JSONSnapshot(data: bytes.span.bytes, providerName: providerName, parsingOptions: parsingOptions)
    }

    var providerName: String { json.providerName }
    var description: String { json.description }
    var debugDescription: String { json.debugDescription }

    func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        try json.value(forKey: key, type: type)
    }
}
