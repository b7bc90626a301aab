print("tiler")
