import Foundation
import HTTPTypes
import TileNetwork

/// The signed values of an ``AccessPolicy``: a session (the `tiler_session` cookie), an access token
/// (what the token service posts to a viewer, for the probe service), and a login form's CSRF value.
///
/// A value is `v1.` + the base64url of its claims (JSON) + `.` + the base64url of their HMAC-SHA-256
/// under a key of its kind (derived from the policy's key: a session is no token, nor the reverse).
/// It is taken only when its code matches (compared in constant time), it has not expired, and its
/// session has not been revoked here.
struct AccessClaims: Codable, Sendable, Hashable {
    /// The user, their groups, the expiry (seconds since 1970), the session's identifier.
    var u: String
    var g: [String]
    var e: Int
    var n: String

    var viewer: Viewer { Viewer(user: u, groups: Set(g), session: n, expiry: e) }
}

enum AccessKind: String {
    case session, token, form
}

extension AccessPolicy {
    static let cookieName = "tiler_session"
    static let formCookieName = "tiler_login"

    /// `claims` signed as a value of `kind`.
    func sign(_ claims: AccessClaims, as kind: AccessKind) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let payload = Self.base64URL(Array((try? encoder.encode(claims)) ?? Data()))
        return "v1.\(payload).\(Self.base64URL(code(payload, kind)))"
    }

    /// The claims of `value` when it is a value of `kind` this policy's key signed, unexpired and not revoked.
    func read(_ value: some StringProtocol, as kind: AccessKind, now: Date = Date()) -> AccessClaims? {
        let parts = value.split(separator: ".", omittingEmptySubsequences: false)
        guard value.utf8.count <= 4096, parts.count == 3, parts[0] == "v1" else { return nil }
        // The code's text compared, not its bytes: base64's last character has spare bits, and a value
        // this server did not write is not taken.
        let expected = Self.base64URL(code(String(parts[1]), kind))
        guard Self.isEqual(Array(parts[2].utf8), Array(expected.utf8)), let json = Self.bytes(base64URL: parts[1]),
            let claims = try? JSONDecoder().decode(AccessClaims.self, from: Data(json)),
            Double(claims.e) > now.timeIntervalSince1970, !state.isRevoked(claims.n)
        else { return nil }
        return claims
    }

    /// New claims for `user`, lasting `lifetime` (never past `until`, a session's end).
    func claims(user: String, groups: Set<String>, lifetime: Duration, session: String? = nil, until: Int? = nil) -> AccessClaims {
        let expiry = min(Int(Date().timeIntervalSince1970) + Int(lifetime.components.seconds), until ?? .max)
        return AccessClaims(u: user, g: groups.sorted(), e: expiry, n: session ?? Self.randomText())
    }

    /// Who sent `fields`: the session in its cookie, else (from a trusted proxy, `peer`) the user header.
    func viewer(cookies fields: HTTPFields, peer: String?) -> Viewer? {
        if let session = Self.cookie(Self.cookieName, in: fields), let claims = read(session, as: .session) { return claims.viewer }
        if let name = userHeader.flatMap({ HTTPField.Name($0) }), let user = fields[name], !user.isEmpty, let peer,
            trustedProxies.contains(where: { $0.contains(peer) })
        {
            let listed = groupsHeader.flatMap({ HTTPField.Name($0) }).flatMap { fields[$0] }?.split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            return Viewer(user: user, groups: Set(listed ?? []).union(groups[user] ?? []), session: nil)
        }
        return nil
    }

    /// The viewer an access token (`Authorization: Bearer ...`) names.
    func viewer(bearer authorization: String?) -> Viewer? {
        guard let authorization, authorization.count > 7, authorization.prefix(7).lowercased() == "bearer " else { return nil }
        return read(authorization.dropFirst(7).drop { $0 == " " }, as: .token)?.viewer
    }

    /// The value of cookie `name` among the `Cookie` fields.
    static func cookie(_ name: String, in fields: HTTPFields) -> Substring? {
        for field in fields[values: .cookie] {
            for pair in field.split(separator: ";") {
                let pair = pair.drop { $0 == " " }
                if pair.hasPrefix(name + "=") { return pair.dropFirst(name.count + 1) }
            }
        }
        return nil
    }

    private func code(_ payload: String, _ kind: AccessKind) -> [UInt8] {
        let key = Digest.hmacSHA256(key: sessionKey, Array("tiler access \(kind.rawValue)".utf8))
        return Digest.hmacSHA256(key: key, Array(payload.utf8))
    }

    /// Whether `a` and `b` are the same bytes, in time that depends only on their lengths.
    static func isEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = a.count ^ b.count
        for i in 0..<min(a.count, b.count) { difference |= Int(a[i] ^ b[i]) }
        return difference == 0
    }

    /// 128 random bits, as base64url.
    static func randomText() -> String {
        var generator = SystemRandomNumberGenerator()
        return base64URL((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func bytes(base64URL text: some StringProtocol) -> [UInt8]? {
        var plain = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while plain.count % 4 != 0 { plain += "=" }
        return Data(base64Encoded: plain).map(Array.init)
    }
}
