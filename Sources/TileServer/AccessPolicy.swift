public import Foundation
public import HTTPTypes
import HummingbirdBcrypt
import NIOConcurrencyHelpers
public import TileCore

#if canImport(Glibc)
import Glibc
#endif

/// Which images not everyone may see in full, and who may (IIIF Authorization Flow 2.0): the rules of
/// the config file's `access` key, the users who log in, and the key that signs their sessions.
///
/// An image whose identifier no rule matches is served as without a policy, by the same fast path.
/// One a rule matches is answered in full only to a client whose session (the `tiler_session` cookie
/// the access service sets, or a trusted proxy's user header) names a user the rule allows; anyone
/// else gets the rule's ``Rule/degraded`` tier (a smaller image: requests whose scale would give more
/// than its limits over the whole image are refused 401) or, without one, nothing but the `info.json`
/// that lists the authorization services. Its answers are `Cache-Control: private, no-cache` and
/// vary on `Cookie`.
///
/// Sessions and tokens are signed with HMAC-SHA-256 under keys derived from ``sessionKey``: servers
/// given the same key accept each other's. A logout ends the session on the instance that answers it
/// at once (and the browser forgets the cookie); other instances accept a copy of it until it expires.
public struct AccessPolicy: Sendable {
    /// Images whose identifiers match ``match``, who may see them in full, and what anyone else gets.
    public struct Rule: Sendable, Hashable, Codable {
        /// A glob on the identifier (`*`, `?`, `[...]`; `*` also crosses `/`); a page of a multi-page
        /// image (`book~2`) is matched by its image's identifier too.
        public var match: String
        /// User names, `group:NAME`, or `*` for any user who logged in.
        public var allow: [String]
        /// What the others get: at most these sizes over the whole image; nil, nothing but `info.json`.
        public var degraded: Tier?

        public init(match: String, allow: [String], degraded: Tier? = nil) {
            (self.match, self.allow, self.degraded) = (match, allow, degraded)
        }
    }

    /// The limits of a degraded image: its whole at most `maxWidth` x `maxHeight` and `maxArea` pixels
    /// (as info.json's properties; `maxHeight` defaults to `maxWidth`).
    public struct Tier: Sendable, Hashable, Codable {
        public var maxWidth: Int?
        public var maxHeight: Int?
        public var maxArea: Int?

        public init(maxWidth: Int? = nil, maxHeight: Int? = nil, maxArea: Int? = nil) {
            (self.maxWidth, self.maxHeight, self.maxArea) = (maxWidth, maxHeight, maxArea)
        }

        var limits: ImageRequest.Limits { ImageRequest.Limits(maxWidth: maxWidth, maxHeight: maxHeight, maxArea: maxArea) }

        /// Whether the tier limits anything: at least one limit, all of them positive.
        public var isLimited: Bool {
            let given = [maxWidth, maxHeight, maxArea].compactMap { $0 }
            return !given.isEmpty && given.allSatisfy { $0 > 0 }
        }
    }

    /// What a client may have of an image a rule matches.
    enum Grant: Sendable, Hashable {
        case full
        case degraded(Tier)
        case none

        var name: String {
            switch self {
            case .full: "full"
            case .degraded: "degraded"
            case .none: "none"
            }
        }
    }

    /// The rules, the first that matches an identifier deciding.
    public var rules: [Rule]
    /// Users and their bcrypt hashes (an htpasswd file's lines), and their groups.
    public var users: [String: String]
    public var groups: [String: Set<String>]
    /// The secret sessions and tokens are signed with (at least 32 bytes).
    public let sessionKey: [UInt8]
    /// How long a session lasts after logging in (default 8 hours); a token at most an hour of it.
    public var sessionLifetime: Duration = .seconds(8 * 3600)
    public var tokenLifetime: Duration = .seconds(3600)
    /// Origins of viewers (`https://viewer.example`) that may read restricted answers with the
    /// browser's credentials (CORS), and to which the token service posts tokens; besides them, only
    /// this server's own pages (its viewer) get tokens (a token names its user).
    public var viewerOrigins: Set<String> = []
    /// A header that names the user (`X-Remote-User`), taken only from ``trustedProxies``, and one that
    /// lists their groups (comma-separated).
    public var userHeader: String?
    public var groupsHeader: String?
    public var trustedProxies: [AddressRange] = []
    /// What the access service's window and the viewer say (the services' `label`, `heading`, `note`).
    public var label = "Log in to see the full image"
    public var heading = "This image is restricted"
    public var note = "Log in to see it at full resolution."

    let state = AccessState()

    /// A policy of `rules` over `users` (htpasswd lines: `name:hash`), sessions signed with `sessionKey`.
    public init(rules: [Rule], users: [String: String] = [:], groups: [String: Set<String>] = [:], sessionKey: [UInt8]) {
        (self.rules, self.users, self.groups, self.sessionKey) = (rules, users, groups, sessionKey)
        // An unknown user's password is checked as slowly as the slowest known user's.
        let costs = users.values.compactMap { hash in hash.split(separator: "$").dropFirst().first.flatMap { UInt8($0) } }
        let cost = costs.max() ?? 5
        dummyHash = cost <= 5 ? Self.dummyHash : Bcrypt.hash(Self.randomText(), cost: min(cost, 31))
    }

    /// The hash an unknown user's password is checked against (the users' highest cost).
    private let dummyHash: String

    /// `text` when it is an origin (`https://viewer.example`, `http://127.0.0.1:9000`: a scheme, a host and
    /// perhaps a port, nothing else), lowercased; else nil.
    public static func origin(_ text: String) -> String? { TileRoutes.origin(text) }

    /// The rule that decides `id`: the first whose glob matches it (or, for a page, its image's).
    func rule(for id: String) -> Rule? { Self.rule(for: id, in: rules) }

    /// The first of `rules` whose glob matches `id` (or, for a page, its image's).
    static func rule(for id: String, in rules: [Rule]) -> Rule? {
        let base = ImageCatalog.page(of: id)?.name
        return rules.first { rule in
            glob(rule.match, matches: id) || base.map { glob(rule.match, matches: $0) } == true
        }
    }

    /// What `viewer` (nil: anonymous) may have of an image `rule` matches.
    /// A tier without a positive limit gives nothing (a typo in a config file must not give everything).
    func grant(_ rule: Rule, to viewer: Viewer?) -> Grant {
        if let viewer, allows(rule, viewer) { return .full }
        guard let tier = rule.degraded, tier.isLimited else { return .none }
        return .degraded(tier)
    }

    /// What `viewer` may have of `id`: nil when no rule matches it (everything).
    func grant(of id: String, to viewer: Viewer?) -> Grant? { rule(for: id).map { grant($0, to: viewer) } }

    func allows(_ rule: Rule, _ viewer: Viewer) -> Bool {
        rule.allow.contains { entry in
            if entry == "*" { return true }
            if entry.hasPrefix("group:") { return viewer.groups.contains(String(entry.dropFirst(6))) }
            return entry == viewer.user
        }
    }

    /// Whether `pattern` matches the whole of `text` (fnmatch(3), no flags: `*` crosses `/`).
    static func glob(_ pattern: String, matches text: String) -> Bool { fnmatch(pattern, text, 0) == 0 }

    /// Whether `password` is `user`'s: bcrypt against the user's hash (htpasswd's `$2y$` read as `$2b$`,
    /// the same algorithm), or against a dummy hash for an unknown user (the same time either way).
    /// Blocking: call it on a thread pool.
    func verify(user: String, password: String) -> Bool {
        guard let hash = users[user], hash.hasPrefix("$2") else {
            _ = Bcrypt.verify(password, hash: dummyHash)
            return false
        }
        // (Past 72 bytes bcrypt reads no more, as htpasswd's hash did not.)
        let readable = hash.hasPrefix("$2y$") ? "$2b$" + hash.dropFirst(4) : hash
        return Bcrypt.verify(password, hash: readable)
    }

    /// A bcrypt hash of 32 random bytes no one knows (cost 5, htpasswd's default): what an unknown user's
    /// password is checked against.
    static let dummyHash = "$2b$05$5DeW.jqarrctJL0q6eSYeOZtXb2DmfnfU60/7jgOQ/o6Mz2rBsGBq"

    /// An htpasswd file's users (`name:hash` a line; `#` comments and blank lines skipped).
    public static func users(htpasswd text: String) -> [String: String] {
        var users: [String: String] = [:]
        for line in text.split(whereSeparator: \.isNewline) where !line.hasPrefix("#") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces)
            if !name.isEmpty { users[name] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces) }
        }
        return users
    }

    /// A group file's groups (Apache's `AuthGroupFile`: `group: user user ...` a line), as each user's groups.
    public static func groups(groupFile text: String) -> [String: Set<String>] {
        var groups: [String: Set<String>] = [:]
        for line in text.split(whereSeparator: \.isNewline) where !line.hasPrefix("#") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let group = line[..<colon].trimmingCharacters(in: .whitespaces)
            for user in line[line.index(after: colon)...].split(whereSeparator: \.isWhitespace) {
                groups[String(user), default: []].insert(group)
            }
        }
        return groups
    }
}

/// Who a request is from, as its session or a trusted proxy says.
struct Viewer: Sendable, Hashable {
    var user: String
    var groups: Set<String>
    /// The session's identifier (nil: a proxy's header), what a logout revokes.
    var session: String?
    /// When the session ends (seconds since 1970; nil: a proxy's header): a token never outlives it.
    var expiry: Int?
}

/// What a policy remembers while the server runs: sessions ended by a logout (until they would have
/// expired), and login attempts by client (at most ``AccessState/failuresAllowed`` a minute that do not
/// succeed; an IPv6 client is its /64). Each table holds at most ``AccessState/capacity`` entries, the
/// oldest dropped first.
final class AccessState: Sendable {
    static let failuresAllowed = 5
    static let window: Double = 60
    static let capacity = 100_000
    /// Passwords checked at once at most (half the cores, at least one): each check is a bcrypt on the
    /// server's blocking pool, and logins from many clients must not take that pool from reads and builds.
    static let concurrentChecks = max(1, ProcessInfo.processInfo.activeProcessorCount / 2)
    /// Logins waiting for a turn to be checked at most; one more is answered 503 at once.
    static let waitingChecks = 32
    private struct State {
        var revoked: [String: Double] = [:]
        var attempts: [String: (count: Int, since: Double)] = [:]
        var checking = 0
        var waiting: [CheckedContinuation<Bool, Never>] = []
    }
    private let state = NIOLockedValueBox(State())

    /// Waits for a turn to check a password (first come, first served; no thread held): false at once
    /// when ``waitingChecks`` logins wait already. Every turn given is given back by ``endCheck()``.
    func beginCheck() async -> Bool {
        await withCheckedContinuation { (waiter: CheckedContinuation<Bool, Never>) in
            let answer = state.withLockedValue { state -> Bool? in
                if state.checking < Self.concurrentChecks {
                    state.checking += 1
                    return true
                }
                guard state.waiting.count < Self.waitingChecks else { return false }
                state.waiting.append(waiter)
                return nil  // its turn comes from endCheck()
            }
            if let answer { waiter.resume(returning: answer) }
        }
    }

    /// Gives back a turn ``beginCheck()`` gave: to the login that has waited longest, if any.
    func endCheck() {
        let next = state.withLockedValue { state -> CheckedContinuation<Bool, Never>? in
            guard !state.waiting.isEmpty else {
                state.checking -= 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume(returning: true)
    }

    /// Logins checked now and waiting for their turn.
    var checks: (running: Int, waiting: Int) { state.withLockedValue { ($0.checking, $0.waiting.count) } }

    func revoke(_ session: String, until expiry: Double) {
        state.withLockedValue { state in
            let now = Date().timeIntervalSince1970
            if state.revoked.count >= Self.capacity { state.revoked = state.revoked.filter { $0.value > now } }
            if state.revoked.count >= Self.capacity {
                // Sessions that end soonest go first (a logout of one that never ends cannot be kept).
                let kept = state.revoked.sorted { $0.value > $1.value }.prefix(Self.capacity / 2)
                state.revoked = Dictionary(uniqueKeysWithValues: kept.map { ($0.key, $0.value) })
            }
            state.revoked[session] = expiry
        }
    }

    func isRevoked(_ session: String) -> Bool { state.withLockedValue { $0.revoked[session] != nil } }

    /// Counts a login attempt of `client` before its password is checked: nil when it may try now,
    /// else the seconds until it may (its attempts that did not succeed this minute are used up).
    func attempt(_ address: String) -> Int? {
        let client = Self.key(address)
        return state.withLockedValue { state in
            let now = Date().timeIntervalSince1970
            if let entry = state.attempts[client], now - entry.since < Self.window {
                guard entry.count < Self.failuresAllowed else { return max(1, Int((Self.window - (now - entry.since)).rounded(.up))) }
                state.attempts[client] = (entry.count + 1, entry.since)
                return nil
            }
            if state.attempts.count >= Self.capacity { state.attempts = state.attempts.filter { now - $0.value.since < Self.window } }
            if state.attempts.count >= Self.capacity {
                let kept = state.attempts.sorted { $0.value.since > $1.value.since }.prefix(Self.capacity / 2)
                state.attempts = Dictionary(uniqueKeysWithValues: kept.map { ($0.key, $0.value) })
            }
            state.attempts[client] = (1, now)
            return nil
        }
    }

    /// An attempt of `client` is not counted against it: its login succeeded, or its password was never checked.
    func giveBack(_ address: String) {
        let client = Self.key(address)
        state.withLockedValue { state in
            if let entry = state.attempts[client] { state.attempts[client] = (max(0, entry.count - 1), entry.since) }
        }
    }

    /// What attempts are counted by: an IPv4 address, or an IPv6 address's first four groups (its /64, what
    /// one client is given).
    static func key(_ address: String) -> String { AddressRange.clientKey(address) ?? address }
}
