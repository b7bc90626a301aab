import ArgumentParser
import TileCore
import TileNetwork

extension BuildCommand {
    /// Where each image's store goes in a bucket, `out` an `s3://` URL, following `storePaths`: one
    /// image and a URL not ending in `/` names the store itself; otherwise a prefix receiving
    /// `<name>.tiles` for each.
    /// - Throws: `ValidationError` for a URL that names no bucket, or two images of one store name.
    static func bucketStores(names: [String], out: String) throws -> [S3Location] {
        guard let location = S3Location(out) else {
            throw ValidationError("--out \(out): not a bucket's URL (s3://BUCKET/PREFIX, the bucket in lower case, 3 to 63 characters).")
        }
        var key = location.key
        while key.hasSuffix("/") { key.removeLast() }
        if names.count == 1, !location.key.hasSuffix("/"), !key.isEmpty { return [S3Location(bucket: location.bucket, key: key)] }
        let stores = names.map { S3Location(bucket: location.bucket, key: key.isEmpty ? "\($0).tiles" : "\(key)/\($0).tiles") }
        var seen: Set<String> = []
        for store in stores where !seen.insert(store.key).inserted {
            throw ValidationError("two inputs would both be stored as \(store); build them into different prefixes.")
        }
        return stores
    }

    /// Fails naming the first of `locations` that holds a store (a manifest, whole or not).
    static func refuseTaken(_ locations: [S3Location], in store: S3Client) async throws {
        for location in locations {
            let taken: Bool
            do { taken = try await store.store(at: location) != nil } catch let error as TileError where error.code == .invalidStore {
                taken = true
            } catch {
                throw fail(location.description, error)
            }
            if taken {
                throw fail(location.description, TileError(.invalidArgument, "a store exists there: not replaced (--force replaces it)"))
            }
        }
    }
}
