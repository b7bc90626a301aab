public enum TileActorsPlaceholder {}
