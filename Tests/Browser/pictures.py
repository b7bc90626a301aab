"""The pictures the browser tests show and compare with (shared by viewer_test.py and mirador_test.py),
made here with numpy and Pillow, and PSNR, their measure."""
import math
import numpy as np
from PIL import Image, ImageFilter

W, H = 3000, 2000

def make_image(path, width=W, height=H, **save):
    """A photograph-like pattern: smooth colour waves, black grid lines every 500 pixels (a JPEG at
    quality 95 without chroma subsampling unless `save` says otherwise)."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    r = 127.5 + 127.5 * np.sin(x / 97.0) * np.cos(y / 131.0)
    g = 255.0 * x / (width - 1)
    b = 127.5 + 127.5 * np.sin(np.hypot(x - width / 3, y - height / 2) / 40.0)
    pixels = np.dstack([r, g, b]).clip(0, 255).astype(np.uint8)
    # Grid lines every 500 pixels, so misplaced tiles show.
    pixels[::500, :, :] = 0
    pixels[:, ::500, :] = 0
    Image.fromarray(pixels).save(path, **(save or {"quality": 95, "subsampling": 0}))


def make_book(path):
    """A three-page TIFF master (uncompressed strips, not a pyramid: `tiler serve` makes it a book), its
    pages of different sizes and pictures: 2400 x 1600 colour waves with a black grid every 400 pixels;
    1500 x 2100 squares of 150 pixels in four colours (edges softened) over a vertical blue ramp;
    1800 x 1800 rings. Returns the pages (PIL images), in order."""
    def page(width, height):
        y, x = np.mgrid[0:height, 0:width].astype(np.float64)
        return x, y
    x, y = page(2400, 1600)
    waves = np.dstack([127.5 + 127.5 * np.sin(x / 83.0) * np.cos(y / 117.0), 255.0 * y / 1599,
                       127.5 + 127.5 * np.cos(np.hypot(x - 1600, y - 600) / 50.0)]).clip(0, 255).astype(np.uint8)
    waves[::400, :, :] = 0
    waves[:, ::400, :] = 0
    x, y = page(1500, 2100)
    colours = np.array([[210, 50, 50], [240, 200, 60], [40, 150, 70], [250, 250, 250]], np.float64)
    squares = colours[((x // 150) + 2 * (y // 150)).astype(int) % 4]
    squares[..., 2] = 0.6 * squares[..., 2] + 0.4 * 255.0 * y / 2099
    x, y = page(1800, 1800)
    d = np.hypot(x - 900, y - 900)
    rings = np.dstack([127.5 + 127.5 * np.sin(d / 45.0), 255.0 * x / 1799,
                       127.5 + 127.5 * np.cos(d / 70.0)]).clip(0, 255).astype(np.uint8)
    pages = [Image.fromarray(p.clip(0, 255).astype(np.uint8)) for p in (waves, squares, rings)]
    # (Edges softened: sharp ones, shrunk by OpenSeadragon and by Pillow, are where the two differ most.)
    pages[1] = pages[1].filter(ImageFilter.GaussianBlur(3))
    pages[0].save(path, save_all=True, append_images=pages[1:])
    return pages


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * math.log10(255 * 255 / mse)
