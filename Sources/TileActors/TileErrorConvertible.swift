public import TileCore

/// An error of another module (a source's own, e.g. HTTP) that says which `TileError` it amounts to,
/// so ``ImageLoader`` reports it with the right code.
public protocol TileErrorConvertible: Error {
    var tileError: TileError { get }
}
