"""The viewer page in a real browser: headless Chromium (Debian's) driven by Playwright.

Starts `tiler serve` on a folder holding a generated photograph-like JPEG, then:
  1. screenshots at view states given in the URL fragment, compared with the source's own pixels
     (Pillow's decode, cropped, box-averaged for coarser zooms): PSNR thresholds stated below;
  2. a drag and a wheel zoom: the view (the fragment) moves as far as the pointer did, the zoom
     doubles about the pointer, and the tiles requested are those of the level the zoom needs.
Screenshots are kept in the folder given as the first argument, to look at.
Exits non-zero on any failure.
"""
import math, os, re, subprocess, sys, tempfile, time
import numpy as np
from PIL import Image
from playwright.sync_api import sync_playwright

OUT = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()
TILER = sys.argv[2] if len(sys.argv) > 2 else "tiler"
W, H = 3000, 2000
VIEW_W, VIEW_H = 1000, 700
failures = []

def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)

def make_image(path):
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    r = 127.5 + 127.5 * np.sin(x / 97.0) * np.cos(y / 131.0)
    g = 255.0 * x / (W - 1)
    b = 127.5 + 127.5 * np.sin(np.hypot(x - W / 3, y - H / 2) / 40.0)
    pixels = np.dstack([r, g, b]).clip(0, 255).astype(np.uint8)
    # Grid lines every 500 pixels, so misplaced tiles show.
    pixels[::500, :, :] = 0
    pixels[:, ::500, :] = 0
    Image.fromarray(pixels).save(path, quality=95, subsampling=0)

def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * math.log10(255 * 255 / mse)

def expected_view(source, cx, cy, z):
    """What the view shows: the source box-averaged by 1/z (z = 1/2^k) around (cx, cy)."""
    f = int(round(1 / z))
    small = source.reshape(H // f, f, W // f, f, 3).mean(axis=(1, 3)) if f > 1 else source.astype(np.float64)
    left, top = int(round(cx * z - VIEW_W / 2)), int(round(cy * z - VIEW_H / 2))
    return small[top:top + VIEW_H, left:left + VIEW_W]

def fragment(page):
    values = dict(re.findall(r"([xyz])=([0-9.e+-]+)", page.evaluate("location.hash")))
    return {k: float(v) for k, v in values.items()}

def settle(page):
    page.wait_for_function(
        "() => { const imgs = [...document.querySelectorAll('#view img')];"
        " return imgs.length > 0 && imgs.every(i => i.complete && i.naturalWidth > 0); }", timeout=30000)
    page.wait_for_timeout(300)

def main():
    folder = tempfile.mkdtemp()
    make_image(os.path.join(folder, "photo.jpg"))
    source = np.asarray(Image.open(os.path.join(folder, "photo.jpg")).convert("RGB"))
    log = open(os.path.join(folder, "serve.log"), "w+")
    server = subprocess.Popen([TILER, "serve", folder, "--port", "0", "--cache", os.path.join(folder, "cache")], stderr=log, stdout=log)
    try:
        port = None
        for _ in range(200):
            log.seek(0)
            found = re.search(r"http://127\.0\.0\.1:(\d+)/", log.read())
            if found:
                port = int(found.group(1))
                break
            time.sleep(0.05)
        check(port is not None, "tiler serve started")
        base = f"http://127.0.0.1:{port}"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": VIEW_W, "height": VIEW_H}, device_scale_factor=1)
            requested = []
            page.on("request", lambda r: requested.append(r.url))
            # 1. View states from the fragment, against the source's pixels.
            for (cx, cy, z, threshold) in [(1500, 1000, 1, 30), (1234, 777, 1, 30), (1500, 1000, 0.5, 27), (2000, 1300, 0.5, 27)]:
                page.goto(f"{base}/view/photo#x={cx}&y={cy}&z={z}")
                page.add_style_tag(content="#status{display:none}")
                settle(page)
                shot = os.path.join(OUT, f"view-{cx}-{cy}-{z}.png")
                page.screenshot(path=shot)
                got = np.asarray(Image.open(shot).convert("RGB"))
                value = psnr(got, expected_view(source, cx, cy, z))
                check(value >= threshold, f"view x={cx} y={cy} z={z}: {value:.1f} dB against the source (at least {threshold})")
            # The default view: the whole image fitted and centred (0.333 here), the rest of the window empty.
            page.goto(f"{base}/view/photo")
            page.add_style_tag(content="#status{display:none}")
            settle(page)
            fitted = fragment(page)
            shot = os.path.join(OUT, "fitted.png")
            page.screenshot(path=shot)
            got = np.asarray(Image.open(shot).convert("RGB")).astype(np.float64)
            check(abs(fitted["z"] - 1 / 3) < 1e-3 and abs(fitted["x"] - 1500) < 1 and abs(fitted["y"] - 1000) < 1,
                  f"the default view fits the image: {fitted}")
            # 1000 x 666.7 pixels of image in a 1000 x 700 window: rows 17..683 hold it. Level 2 (750 x 500)
            # is drawn at 4/3: compare the middle of the window with the source shrunk by 3.
            small = np.asarray(Image.open(os.path.join(folder, "photo.jpg")).convert("RGB").resize((1000, 667), Image.BOX)).astype(np.float64)
            value = psnr(got[100:600, 100:900], small[83:583, 100:900])
            check(value >= 24, f"the fitted view against the source shrunk by 3: {value:.1f} dB (at least 24)")
            check(got[:10].max() < 60 and got[-10:].max() < 60, "above and below the image: the dark background")
            # 2. A drag and a wheel zoom.
            page.goto(f"{base}/view/photo#x=1500&y=1000&z=1")
            settle(page)
            page.mouse.move(500, 350)
            page.mouse.down()
            for step in range(1, 11):
                page.mouse.move(500 - 20 * step, 350 - 10 * step)
            page.mouse.up()
            page.wait_for_timeout(300)
            moved = fragment(page)
            check(abs(moved["x"] - 1700) < 1 and abs(moved["y"] - 1100) < 1 and abs(moved["z"] - 1) < 1e-3,
                  f"a drag of (-200, -100) moves the centre to (1700, 1100): {moved}")
            settle(page)
            page.screenshot(path=os.path.join(OUT, "after-drag.png"))
            requested.clear()
            page.mouse.move(300, 200)
            page.mouse.wheel(0, 300)   # 2^(-300/300): zoom out by half, about the pointer
            page.wait_for_timeout(300)
            zoomed = fragment(page)
            # The image point under the pointer stays put: (1700 + (300 - 500) / 1, ...) at zoom 0.5.
            ix, iy = 1700 - 200, 1100 - 150
            want_x, want_y = ix + 200 / 0.5, iy + 150 / 0.5
            check(abs(zoomed["z"] - 0.5) < 1e-3 and abs(zoomed["x"] - want_x) < 1 and abs(zoomed["y"] - want_y) < 1,
                  f"a wheel step zooms to 0.5 about the pointer, centre ({want_x}, {want_y}): {zoomed}")
            settle(page)
            page.screenshot(path=os.path.join(OUT, "after-wheel.png"))
            # The tiles the page shows now (requested, or from the browser's cache): the level the zoom
            # needs (scale 2 at zoom 0.5) and the coarsest level's placeholder, nothing of level 0.
            shown = page.evaluate("[...document.querySelectorAll('#view img')].map(i => i.src)")
            scales = set()
            for u in shown:
                x, y, w, h, sw, sh = map(int, re.findall(r"/(\d+),(\d+),(\d+),(\d+)/(\d+),(\d+)/", u)[0])
                scales.add(round(max(w / sw, h / sh)))
            check(2 in scales and 1 not in scales and len(scales) == 2,
                  f"after zooming out the tiles shown are at scale 2, under the coarsest level's: {sorted(scales)}")
            fresh = [u for u in requested if "/iiif/3/photo/" in u and u.endswith(".jpg")]
            check(all(round(int(re.findall(r"/\d+,\d+,(\d+),\d+/(\d+),", u)[0][0]) / int(re.findall(r"/\d+,\d+,(\d+),\d+/(\d+),", u)[0][1])) >= 2 for u in fresh),
                  f"no level-0 tile was requested after zooming out ({len(fresh)} requests)")
            browser.close()
    finally:
        server.terminate()
        server.wait(10)
    print(f"screenshots in {OUT}")
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)

main()
