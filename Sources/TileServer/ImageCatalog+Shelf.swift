import Foundation
import Logging
import TileActors
import TileCore

extension ImageCatalog {
    /// Copies `id`'s store from ``shelf`` into the cache at `store`, when the shelf holds one built
    /// from this version of `source` (its size, then its fingerprint compared: the master read once),
    /// and makes it `id`'s ready image: what another server built is not built again. Called with the
    /// cache's lock on `id` held. The copy's room is reserved in the budget first.
    /// - Returns: false when the shelf has no such store, cannot be asked (its failure logged), or
    ///   the copy fails: the caller builds the image.
    func copyFromShelf(_ id: String, _ source: SourceFile, to store: String) async -> Bool {
        guard let shelf else { return false }
        let shelved: ShelvedStore
        do {
            guard let found = try await shelf.find(id) else {
                ServerMetrics.recordShelf("copy", outcome: "absent")
                return false
            }
            shelved = found
        } catch {
            ServerMetrics.recordShelf("copy", outcome: "failed")
            logger.warning("the store shelf cannot be asked: building here", metadata: ["id": "\(id)", "shelf": "\(shelf)", "error": "\(error)"])
            return false
        }
        let path = source.path
        guard shelved.sourceByteCount.map({ $0 == source.fingerprint.identity.byteCount }) ?? true,
            let local = try? await threadPool.blocking({ () throws(TileError) in try TiledImage.sourceFingerprint(ofFile: path) }),
            local.fingerprint == shelved.sourceFingerprint
        else {
            ServerMetrics.recordShelf("copy", outcome: "other_version")
            return false
        }
        guard let reservation = await budget.reserve(byteCount: shelved.tiffByteCount, path: store) else {
            ServerMetrics.recordShelf("copy", outcome: "over_budget")
            return false
        }
        do { try await shelf.copy(shelved, to: store) } catch {
            await budget.unregister(reservation)
            ServerMetrics.recordShelf("copy", outcome: "failed")
            logger.warning("a store of the shelf could not be copied: building here", metadata: ["id": "\(id)", "error": "\(error)"])
            return false
        }
        await budget.unregister(reservation)
        let fingerprint = source.fingerprint
        await threadPool.blocking { CacheStoreRecord.write(fingerprint, forStore: store) }
        ServerMetrics.recordShelf("copy", outcome: "copied")
        return await reuse(id, source, store)
    }

    /// Publishes `pyramid`'s store (just built for `id`) on ``shelf``, in a task of the catalog's own:
    /// the pyramid kept open until it is done (the budget evicts no store in use). A failure is logged;
    /// nothing half published is seen by others (the shelf's manifest goes last).
    func publishOnShelf(_ id: String, _ pyramid: TiledImage) {
        guard let shelf, let path = pyramid.storePath else { return }
        let logger = self.logger
        _ = tasks.spawn {
            do {
                try await shelf.publish(id, store: path)
                ServerMetrics.recordShelf("publish", outcome: "published")
            } catch {
                ServerMetrics.recordShelf("publish", outcome: "failed")
                logger.warning("a store could not be published on the shelf", metadata: ["id": "\(id)", "shelf": "\(shelf)", "error": "\(error)"])
            }
            withExtendedLifetime(pyramid) {}
        }
    }
}
